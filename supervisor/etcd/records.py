"""Plain result records: what callers get back, free of any generated protobuf type."""

from __future__ import annotations

import enum

import attrs


@attrs.frozen
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int = 0
    mod_revision: int = 0
    version: int = 0
    lease: int = 0


@attrs.frozen
class Member:
    id: int
    name: str
    peer_urls: tuple[str, ...]
    client_urls: tuple[str, ...]
    is_learner: bool

    @property
    def started(self) -> bool:
        """A member added but not yet started has no name and no client URLs."""
        return bool(self.name)


@attrs.frozen
class EndpointStatus:
    endpoint: str
    member_id: int
    leader_id: int
    raft_index: int
    raft_applied_index: int
    raft_term: int
    db_size: int
    db_size_in_use: int
    is_learner: bool
    version: str
    errors: tuple[str, ...]
    revision: int = 0  # the member's own store revision (the response header's)
    # etcd 3.6+: the minor a downgrade was enabled towards ("3.5.0"), "" when none is.
    downgrade_target: str = ""
    storage_version: str = ""  # etcd 3.6+: the version its data is kept in ("3.6.0")

    @property
    def is_leader(self) -> bool:
        return self.member_id != 0 and self.member_id == self.leader_id


class AlarmKind(enum.Enum):
    NOSPACE = 1
    CORRUPT = 2


@attrs.frozen
class Alarm:
    member_id: int
    kind: AlarmKind


@attrs.frozen
class HashKV:
    member_id: int
    hash: int
    compact_revision: int
    revision: int


@attrs.frozen
class SnapshotResult:
    size: int
    """Bytes written to the sink, etcd's trailing checksum included."""
    sha256: str
    """Hex sha256 of everything written to the sink (to check a stored copy later)."""
    verified: bool
    """The trailing 32 bytes equal the sha256 of the bytes before them."""
    revision: int = 0
    """The store revision the snapshot was taken at (0: the server did not say; etcd < 3.6)."""
    endpoint: str = ""


class PermissionKind(enum.Enum):
    READ = 0
    WRITE = 1
    READWRITE = 2


@attrs.frozen
class TxnResult:
    succeeded: bool
    revision: int
    responses: tuple[TxnOpResult, ...]


@attrs.frozen
class TxnOpResult:
    """One operation's outcome: the key-values a get read, or how many keys a delete removed."""

    kvs: tuple[KeyValue, ...] = ()
    deleted: int = 0
    revision: int = 0

"""What a backup is made of, in domain terms (no I/O)."""

from __future__ import annotations

from attrs import frozen


@frozen
class SnapshotTaken:
    """A snapshot streamed out of one member: bytes written, their sha256, the revision it holds
    (0 when etcd did not say: before 3.6 it only shows once the snapshot is restored)."""

    size: int
    sha256: str
    revision: int
    endpoint: str


@frozen
class KvHash:
    """etcd's HashKV: a hash of the key-value store up to `revision`."""

    hash: int
    revision: int
    compact_revision: int

"""What backups need beyond the cluster's ports: somewhere to verify a snapshot, and a way to
restore one as a new cluster's seed."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Protocol

from attrs import frozen

from actors.backup.records import KvHash
from actors.model import MemberLaunch, RestoreSpec


class SnapshotVerifier(Protocol):
    """Restores a snapshot into a scratch one-member etcd that no cluster can reach, and hashes it."""

    async def restored_hash(self, snapshot: AsyncIterable[bytes]) -> KvHash:
        """HashKV of the restored store at its own head revision (which is the snapshot's)."""
        ...


@frozen
class Restored:
    """What a seed was restored from."""

    key: str
    size: int
    sha256: str


class SeedRestorer(Protocol):
    """Lays a backup's data into a new cluster's seed member, before it first starts."""

    async def restore_seed(self, launch: MemberLaunch, source: RestoreSpec) -> Restored:
        """Fetch the snapshot, check it, and restore it as the data of `launch`'s member with a
        cluster identity of its own. Raises RestoreFailed (the member's data left absent)."""
        ...

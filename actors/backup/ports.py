"""What the backup actor needs beyond the cluster's ports: somewhere to verify a snapshot."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Protocol

from actors.backup.records import KvHash


class SnapshotVerifier(Protocol):
    """Restores a snapshot into a scratch one-member etcd that no cluster can reach, and hashes it."""

    async def restored_hash(self, snapshot: AsyncIterable[bytes]) -> KvHash:
        """HashKV of the restored store at its own head revision (which is the snapshot's)."""
        ...

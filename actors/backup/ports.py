"""What backups need beyond the cluster's ports (`BackupPorts`): where snapshots go,
somewhere to verify a snapshot, a way to restore one as a new cluster's seed, and where
on-demand backups (EtcdBackup) come from and report to."""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Callable, Sequence
from typing import Protocol

from attrs import frozen

from actors.backup.deltas import Change
from actors.backup.keys import KeyRing
from actors.backup.records import KvHash
from actors.model import ClusterRef, EtcdBackup, EtcdBackupStatus, MemberLaunch, RestoreSpec, StoreSpec
from actors.store_port import ObjectStore


class SnapshotVerifier(Protocol):
    """Restores a snapshot into a scratch one-member etcd that no cluster can reach, and hashes it."""

    async def restored_hash(self, snapshot: AsyncIterable[bytes]) -> KvHash:
        """HashKV of the restored store at its own head revision (which is the snapshot's)."""
        ...

    async def replayed_hash(
        self, snapshot: AsyncIterable[bytes], changes: Sequence[Change], target: int, *, compact_to: int = 0
    ) -> KvHash:
        """HashKV at `target` of the snapshot restored with `changes` replayed onto it, one
        transaction per original revision (supervisor/etcd/replay.py), its history compacted
        to `compact_to` first (the source's compaction, so the two hashes cover the same
        revisions). Raises RestoreFailed when the changes do not reach `target` exactly."""
        ...


@frozen
class Restored:
    """What a seed was restored from."""

    key: str
    size: int
    sha256: str
    # HashKV the backup recorded at its revision (its metadata object); None when it has none
    # (not verified when taken, or not one of our backups): then nothing can be compared.
    revision: int = 0
    kv_hash: int | None = None


class SeedRestorer(Protocol):
    """Lays a backup's data into a new cluster's seed member, before it first starts."""

    async def restore_seed(self, launch: MemberLaunch, source: RestoreSpec) -> Restored:
        """Fetch the snapshot, check it, and restore it as the data of `launch`'s member with a
        cluster identity of its own. Raises RestoreFailed (the member's data left absent)."""
        ...


class BackupRequests(Protocol):
    """On-demand backups: the EtcdBackup resources, and where their status goes.

    Local mode reads them from the manifest file and writes each status to a JSON file;
    on Kubernetes they are EtcdBackup objects and the status is their status subresource.
    """

    async def pending(self, cluster: ClusterRef) -> Sequence[EtcdBackup]:
        """`cluster`'s backups not yet Succeeded or Failed, oldest first (Running ones too:
        a daemon that stopped mid-backup takes it again)."""
        ...

    async def report(self, backup: EtcdBackup, status: EtcdBackupStatus) -> None:
        """Record a backup's progress; after a final phase it is no longer pending."""
        ...


class BackupResolver(Protocol):
    """Where an EtcdBackup's snapshot is, for spec.restore.backupName."""

    async def resolve(self, namespace: str, name: str) -> RestoreSpec:
        """The store and key of a Succeeded EtcdBackup; RestoreFailed saying why when it is
        unknown, not Succeeded, or its store cannot be told (restore_source.py decides)."""
        ...


class BackupKeySource(Protocol):
    """Where a cluster's backup encryption keys are (spec.backup.encryption.keySecret): a Secret
    in its namespace on Kubernetes, a file next to the manifest locally."""

    async def key_ring(self, cluster: ClusterRef, secret: str) -> KeyRing:
        """The keys `secret` holds, read at each call (a rotated key is used by the next
        backup). BackupKeyMissing when it is not there, BackupKeyInvalid when a value is not
        the base64 of 32 bytes."""
        ...


@frozen
class BackupPorts:
    """What backups need beyond the cluster's ports. `open_store` opens a store for one use;
    whoever opened it closes it. `requests`: on-demand backups (None: scheduled ones only)."""

    open_store: Callable[[StoreSpec], ObjectStore]
    verifier: SnapshotVerifier | None
    clock: Callable[[], float] = time.time  # wall time, for the schedule (tests speed it up)
    requests: BackupRequests | None = None

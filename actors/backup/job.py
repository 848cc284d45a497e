"""One backup, start to end: snapshot a healthy member straight into the store, read it back and
prove it restores to the same data, then write its metadata object.

Streaming: the snapshot's chunks go from etcd to the store through a small bounded channel, so
the database is never held in memory, and the store's sha256 of what it received must equal
the one computed while reading from etcd (whose own trailing checksum the client checks).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable

import attrs
import trio
from attrs import frozen

from actors.backup.envelope import ALGORITHM, FORMAT
from actors.backup.ports import SnapshotVerifier
from actors.backup.records import KvHash, SnapshotTaken
from actors.backup.source import backup_key, metadata_key, snapshot_source
from actors.errors import EtcdError, EtcdUnavailable, StoreError
from actors.measurements import BackupMeasured, Verification
from actors.observed import Observed
from actors.ports import EtcdAdmin
from actors.store_port import ObjectStore, StoredObject
from supervisor.runtime import leaf_exceptions

# Chunks in flight between etcd and the store: enough to keep both busy, little memory.
PIPE_CHUNKS = 8


class BackupFailed(Exception):
    """The backup could not be taken, stored or verified; the message says which and why.
    `verification`: how its verification ended, when that is why it failed."""

    def __init__(self, message: str, *, verification: Verification | None = None) -> None:
        super().__init__(message)
        self.verification = verification

    def measured(self) -> BackupMeasured:
        return BackupMeasured(verification=self.verification)


@frozen
class BackupOutcome:
    """`size`/`sha256`: the object as stored (compressed, encrypted); `snapshot_size`/
    `snapshot_sha256`: the snapshot etcd sent, which a restore gets back."""

    key: str
    size: int
    sha256: str
    revision: int
    verified: bool
    member: str
    started: float  # unix seconds
    completed: float
    # Why it is not verified when verification was asked for ("" otherwise).
    note: str = ""
    # HashKV at `revision`, once verification proved the source and the restored copy agree.
    kv_hash: int | None = None
    verification: Verification | None = None  # None: not asked for
    snapshot_size: int = 0
    snapshot_sha256: str = ""
    compression: str = "none"
    key_id: str | None = None  # hex; None: not encrypted
    retain_until: float | None = None  # unix seconds: the store locked the object until then

    def measured(self) -> BackupMeasured:
        return BackupMeasured(self.completed - self.started, self.verification)


async def take_backup(
    observed: Observed,
    admin: EtcdAdmin,
    store: ObjectStore,
    *,
    verifier: SnapshotVerifier | None,
    on_demand: str | None = None,
    clock: Callable[[], float] = time.time,
) -> BackupOutcome:
    """Snapshot, store, verify (when a verifier is given), describe. Raises BackupFailed.
    `on_demand`: the EtcdBackup's name, for an on-demand backup (source.backup_key)."""
    endpoint = snapshot_source(observed)
    if endpoint is None:
        raise BackupFailed("no healthy voting member to take a snapshot from")
    started = clock()
    try:
        revision = await admin.revision([endpoint])
        key = backup_key(observed.cluster, started, revision, on_demand)
        taken, stored = await _stream_snapshot(admin, endpoint, store, key)
    except EtcdError as exc:
        raise BackupFailed(f"snapshot of {endpoint} failed: {exc}") from exc
    if stored.content != (taken.size, taken.sha256):
        raise BackupFailed(f"{key}: the store was given {stored.content[0]} bytes, etcd sent {taken.size}")
    outcome = BackupOutcome(
        key, stored.size, stored.sha256, taken.revision or revision, False, endpoint, started, 0.0,
        snapshot_size=taken.size, snapshot_sha256=taken.sha256, compression=stored.compression,
        key_id=stored.key_id, retain_until=stored.retain_until,
    )  # fmt: skip
    if verifier is not None:
        outcome = await _verify(outcome, admin, store, verifier)
    outcome = attrs.evolve(outcome, completed=clock())
    await store.put_bytes(metadata_key(key), json.dumps(describe(outcome, observed)).encode())
    return outcome


async def _stream_snapshot(
    admin: EtcdAdmin, endpoint: str, store: ObjectStore, key: str
) -> tuple[SnapshotTaken, StoredObject]:
    send, receive = trio.open_memory_channel[bytes](PIPE_CHUNKS)
    results: dict[str, object] = {}

    async def produce() -> None:
        async with send:
            results["taken"] = await admin.snapshot(endpoint, send.send)

    async def consume() -> None:
        async with receive:
            results["stored"] = await store.put_stream(key, _chunks(receive))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            nursery.start_soon(consume)
    except BaseExceptionGroup as group:
        raise _cause(group) from group
    taken, stored = results["taken"], results["stored"]
    assert isinstance(taken, SnapshotTaken) and isinstance(stored, StoredObject)
    return taken, stored


def _cause(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error that ended the pipe: the store's or etcd's, not the other side's broken channel."""
    leaves = [e for e in leaf_exceptions(group) if not isinstance(e, trio.Cancelled)]
    typed = [e for e in leaves if isinstance(e, StoreError | EtcdError)]
    return (typed or leaves or [group])[0]


async def _chunks(receive: trio.MemoryReceiveChannel[bytes]) -> AsyncIterator[bytes]:
    async for chunk in receive:
        yield chunk


async def _verify(
    outcome: BackupOutcome, admin: EtcdAdmin, store: ObjectStore, verifier: SnapshotVerifier
) -> BackupOutcome:
    """Restore what the store holds (read back, not what we sent) and compare HashKV with the
    source member's at the same revision."""
    try:
        restored: KvHash = await verifier.restored_hash(store.get_stream(outcome.key))
    except Exception as exc:  # a restore that fails is a failed verification, whatever broke
        raise BackupFailed(
            f"{outcome.key}: the stored snapshot does not restore: {exc}", verification=Verification.FAILED
        ) from exc
    try:
        source = await admin.kv_hash(outcome.member, restored.revision)
    except EtcdUnavailable as exc:  # the source went away: nothing proven yet; try again later
        why = f"{outcome.member} did not answer HashKV to verify it: {exc}"
        raise BackupFailed(f"{outcome.key}: {why}", verification=Verification.INCONCLUSIVE) from exc
    except EtcdError as exc:
        # Compacted past the snapshot already: nothing left to compare with; say so.
        note = f"not verified: the source's revision {restored.revision} is gone ({exc})"
        inconclusive = Verification.INCONCLUSIVE
        return attrs.evolve(outcome, revision=restored.revision, note=note, verification=inconclusive)
    if source.hash != restored.hash:
        raise BackupFailed(
            f"{outcome.key}: verification failed: HashKV at revision {restored.revision} is "
            f"{restored.hash} restored but {source.hash} on {outcome.member}",
            verification=Verification.FAILED,
        )
    return attrs.evolve(
        outcome,
        revision=restored.revision,
        verified=True,
        kv_hash=restored.hash,
        verification=Verification.PASSED,
    )


def describe(outcome: BackupOutcome, observed: Observed) -> dict[str, object]:
    """The metadata object stored beside the snapshot."""
    return {
        "cluster": str(observed.cluster),
        "key": outcome.key,
        "revision": outcome.revision,
        "sizeBytes": outcome.size,  # the stored object's
        "sha256": outcome.sha256,  # of the stored bytes (what `sha256sum` of the object says)
        "snapshotSizeBytes": outcome.snapshot_size,  # the snapshot's, once decoded
        "snapshotSha256": outcome.snapshot_sha256,  # what a restore checks the decoded bytes against
        "compression": outcome.compression,
        "encryption": None if outcome.key_id is None else {"algorithm": ALGORITHM, "keyId": outcome.key_id},
        "format": FORMAT if outcome.key_id or outcome.compression != "none" else None,
        "member": outcome.member,
        "verified": outcome.verified,
        "hashKV": outcome.kv_hash,  # at `revision`: a restore compares its seed's with it
        "note": outcome.note,
        "startTime": outcome.started,
        "completionTime": outcome.completed,
        # Unix seconds: S3 object lock keeps the snapshot (and this object) until then; null: not
        # locked. Retention leaves the backup alone until then (actors/backup/locks.py).
        "retainUntil": outcome.retain_until,
    }

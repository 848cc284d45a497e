"""Restore to a revision (spec.restore.revision): which verified snapshot, and which changes
from the delta chunks after it, give exactly the key-value state at the revision. Shared by the
local and the Kubernetes restorers (supervisor/local/restore.py, supervisor/kube/snapshots.py)
and by the verification of delta backups (actors/backup/delta_verify.py),
which replay the changes in a scratch member of their own.
"""

from __future__ import annotations

import json

import attrs

from actors.backup.deltas import (
    Change,
    changes_up_to,
    chunks_to_replay,
    decode_chunk,
    deltas_prefix,
    parse_chunk_key,
)
from actors.backup.ports import Restored
from actors.backup.source import metadata_key
from actors.errors import RestoreFailed, StoreError
from actors.model import ClusterRef
from actors.store_port import ObjectStore


@attrs.frozen
class PointInTime:
    """What a point-in-time restore starts from: a snapshot and the changes after it."""

    snapshot_key: str
    snapshot_revision: int
    changes: tuple[Change, ...]
    target: int  # the revision restored to
    chunks: int = 0  # how many delta chunks the changes come from

    def restored(self, size: int, sha256: str, kv_hash: int) -> Restored:
        """What the seed was restored from: the snapshot (size, sha256) and the changes."""
        what = f"{self.snapshot_key} (revision {self.snapshot_revision})"
        what += f" + {len(self.changes)} changes from delta backups"
        return Restored(what, size, sha256, self.target, kv_hash)


def source_cluster(key: str) -> ClusterRef:
    """The cluster a backup key belongs to: keys are <namespace>/<name>/..."""
    parts = key.split("/")
    if len(parts) < 3:
        raise RestoreFailed(f"{key} is not a backup key of the form <namespace>/<name>/...")
    return ClusterRef(parts[0], parts[1])


async def plan_point_in_time(store: ObjectStore, key: str, revision: int) -> PointInTime:
    """The snapshot and the changes that give exactly the state at `revision`; RestoreFailed
    naming what is missing otherwise."""
    cluster = source_cluster(key)
    try:
        return await plan_chain(store, cluster, revision)
    except StoreError as exc:
        raise RestoreFailed(f"the backups of {cluster} could not be read: {exc}") from exc


async def plan_chain(store: ObjectStore, cluster: ClusterRef, revision: int) -> PointInTime:
    """What a recovery to `revision` would use: the newest verified snapshot at or below it and
    the stored changes after it. RestoreFailed naming what is missing or unreadable (a gap, a
    chunk that is not one); StoreError when the store does not answer."""
    folder = f"{cluster.namespace}/{cluster.name}/"
    snapshots = [o.key for o in await store.list(folder) if o.key.endswith(".db")]
    candidates = []
    for snapshot in snapshots:
        at = await verified_revision(store, snapshot)
        if at is not None and at <= revision:
            candidates.append((at, snapshot))
    if not candidates:
        raise RestoreFailed(f"no verified snapshot of {cluster} at or below revision {revision}")
    base, snapshot = max(candidates)
    chunks = [c for o in await store.list(deltas_prefix(cluster)) if (c := parse_chunk_key(o.key))]
    try:
        needed = chunks_to_replay(chunks, base, revision)
    except ValueError as exc:
        raise RestoreFailed(f"cannot reach revision {revision} of {cluster}: {exc}") from exc
    changes: list[Change] = []
    for chunk in needed:
        data = await store.get_bytes(chunk.key)
        try:
            changes += changes_up_to(decode_chunk(data), base, revision)
        except (ValueError, KeyError, TypeError) as exc:
            raise RestoreFailed(f"{chunk.key} is not a delta chunk: {exc!r}") from exc
    return PointInTime(snapshot, base, tuple(changes), revision, len(needed))


async def verified_revision(store: ObjectStore, key: str) -> int | None:
    """The exact revision of a verified snapshot (its metadata); None for any other."""
    try:
        meta = json.loads(await store.get_bytes(metadata_key(key)))
    except (StoreError, ValueError):
        return None
    if not isinstance(meta, dict) or not meta.get("verified") or not isinstance(meta.get("revision"), int):
        return None
    return int(meta["revision"])

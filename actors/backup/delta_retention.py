"""Retention of delta chunks: a chunk that ends at or below the revision of the oldest verified
snapshot a store keeps can never be replayed (a restore to a revision starts from a verified
snapshot at or below it, and replays only the changes after it: point_in_time.py), so it goes
once retention has pruned the snapshots. The same in the first store and the second: each by
its own listing and metadata.
"""

from __future__ import annotations

from attrs import frozen

from actors.backup.deltas import ChunkRef, deltas_prefix, parse_chunk_key
from actors.backup.point_in_time import verified_revision
from actors.backup.source import snapshot_of
from actors.model import ClusterRef
from actors.store_port import ObjectStore

DAY = 86400.0


@frozen
class ChunksPruned:
    deleted: tuple[ChunkRef, ...]
    locked: int  # chunks past use but kept: locked until after now


async def prune_deltas(
    store: ObjectStore, cluster: ClusterRef, *, lock_days: int | None, now: float
) -> ChunksPruned:
    """Delete the chunks no kept verified snapshot can use (none while no snapshot is verified).

    With object lock (`lock_days`) a chunk is locked from its put for that many days; its lock
    date is in no metadata, so it is counted from when the store says it was written (at or
    after the lock was set: never early). A locked chunk is not even tried: on a versioned
    bucket a delete would only hide it behind a delete marker (locks.py)."""
    objects = await store.list(f"{cluster.namespace}/{cluster.name}/")
    found = [await verified_revision(store, o.key) for o in objects if snapshot_of(o.key, cluster)]
    revisions = [r for r in found if r is not None]
    if not revisions:
        return ChunksPruned((), 0)
    oldest = min(revisions)
    prefix = deltas_prefix(cluster)
    past_use = [
        (chunk, o.modified)
        for o in objects
        if o.key.startswith(prefix) and (chunk := parse_chunk_key(o.key)) and chunk.last <= oldest
    ]
    deleted, locked = [], 0
    for chunk, written in sorted(past_use, key=lambda c: c[0].first):
        if lock_days is not None and written + lock_days * DAY > now:
            locked += 1
            continue
        await store.delete(chunk.key)
        deleted.append(chunk)
    return ChunksPruned(tuple(deleted), locked)

"""Delta chunks on the second site, store by store on the real servers: copied across kinds and
verified by the sha256 of the bytes read from the first store, caught up after the second site
lost some, and pruned by retention once no kept verified snapshot can use them."""

from __future__ import annotations

import json
import time

from actors.backup.copies import sync_chunks
from actors.backup.delta_retention import DAY, prune_deltas
from actors.backup.deltas import chunk_key, deltas_prefix
from actors.model import ClusterRef
from actors.store_port import ObjectStore
from tests.stores.data import MiB, chunks, drain

DEMO = ClusterRef("default", "demo")


async def chunk_in(store: ObjectStore, first: int, last: int, size: int = 1000) -> str:
    stored = await store.put_stream(chunk_key(DEMO, first, last), chunks(size, seed=first))
    return stored.sha256


async def snapshot_in(store: ObjectStore, revision: int, *, verified: bool = True) -> None:
    key = f"default/demo/20260101T0000{revision:02d}Z-rev{revision}.db"
    await store.put_bytes(key, b"snapshot")
    await store.put_bytes(f"{key}.json", json.dumps({"revision": revision, "verified": verified}).encode())


async def test_chunks_are_copied_to_a_store_of_another_kind_verified_and_caught_up(store_of):
    source, target = store_of("local"), store_of("azure")
    sums = [
        await chunk_in(source, 11, 20, 6 * MiB),
        await chunk_in(source, 21, 30),
        await chunk_in(source, 31, 40),
    ]
    await source.put_bytes(f"{deltas_prefix(DEMO)}not-a-chunk.tmp", b"x")
    await source.put_bytes(chunk_key(ClusterRef("default", "other"), 1, 2), b"another cluster's")

    copied = await sync_chunks(source, target, DEMO)

    keys = [chunk_key(DEMO, 11, 20), chunk_key(DEMO, 21, 30), chunk_key(DEMO, 31, 40)]
    assert [(c.key, c.sha256) for c in copied] == list(zip(keys, sums, strict=True))
    for key, sha in zip(keys, sums, strict=True):
        assert (await drain(target.get_stream(key)))[1] == sha
    assert sorted(o.key for o in await target.list("")) == keys
    assert await sync_chunks(source, target, DEMO) == []
    # The second site lost one (an outage, a bucket restored from elsewhere): only it is copied again.
    await target.delete(keys[1])
    assert [c.key for c in await sync_chunks(source, target, DEMO)] == [keys[1]]


async def test_chunks_no_kept_verified_snapshot_can_use_are_pruned(store_of):
    store = store_of("s3")
    await snapshot_in(store, 10, verified=False)  # not verified: no restore starts from it
    await snapshot_in(store, 20)
    await snapshot_in(store, 35)
    for first, last in [(1, 10), (11, 20), (21, 30), (31, 40)]:
        await chunk_in(store, first, last)
    now = time.time()

    pruned = await prune_deltas(store, DEMO, lock_days=None, now=now)

    assert [(c.first, c.last) for c in pruned.deleted] == [(1, 10), (11, 20)] and pruned.locked == 0
    # 21-30 holds revisions after the oldest verified snapshot (20): a restore to 25 replays it.
    left = sorted(o.key for o in await store.list(deltas_prefix(DEMO)))
    assert left == [chunk_key(DEMO, 21, 30), chunk_key(DEMO, 31, 40)]
    # Locked chunks (immutable) are not even tried until their date.
    await chunk_in(store, 1, 10)
    held = await prune_deltas(store, DEMO, lock_days=1, now=now)
    assert held.deleted == () and held.locked == 1
    later = await prune_deltas(store, DEMO, lock_days=1, now=now + 2 * DAY)
    assert [(c.first, c.last) for c in later.deleted] == [(1, 10)]


async def test_no_chunk_is_pruned_while_no_snapshot_is_verified(store_of):
    store = store_of("local")
    await snapshot_in(store, 20, verified=False)
    await chunk_in(store, 1, 10)
    assert (await prune_deltas(store, DEMO, lock_days=None, now=time.time())).deleted == ()
    assert [o.key for o in await store.list(deltas_prefix(DEMO))] == [chunk_key(DEMO, 1, 10)]

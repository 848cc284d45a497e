"""Replaying delta-backup changes into a scratch etcd (restore to a revision, local and on
Kubernetes): one transaction per original revision, so the scratch's revisions come out the same
as the original's (every etcd revision changes at least one key).

Leases (actors/backup/leases.py): the leases the puts use are granted first with their original
IDs and TTLs, and every lease of the scratch, the snapshot's included, is kept alive until its
snapshot is taken: a lease expiring there would delete its keys at a revision the original
never had, and shift every revision after it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager

import trio

from actors.backup.deltas import Change
from actors.backup.leases import leases_to_grant, replayed_lease
from actors.backup.records import KvHash
from actors.errors import RestoreFailed

from .client import EtcdClient, sole_error
from .errors import Compacted, EtcdError, EtcdUnavailable, LeaseExists
from .txn import Delete, Put, TxnOp

# A lease is refreshed three times per TTL (as etcd's own client does), at most this often.
SHORTEST_REFRESH = 0.2


@asynccontextmanager
async def replaying(
    client: EtcdClient, url: str, changes: Sequence[Change], target: int, *, compact_to: int = 0
) -> AsyncIterator[KvHash]:
    """Apply `changes` to the scratch member at `url`, which must then stand at revision
    `target`; yields its HashKV there (what the restored seed must show). Take the scratch's
    snapshot inside the block: its leases are kept alive until the block ends.

    `compact_to`: the source's compaction revision, when the hash is to be compared with the
    source's: HashKV covers every revision after the compaction, so the scratch's history is
    compacted as far as the source's first (a scratch already compacted further stays so, and
    its hash says so by its compact_revision)."""
    present = set(await client.lease_ids())
    grants = leases_to_grant(changes, present)
    for lease, ttl in grants.items():
        try:
            await client.lease_grant(ttl, lease_id=lease)
        except LeaseExists:
            pass  # a retried grant that had been taken
    held = present | grants.keys()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_keep_alive, client, held)
            try:
                await apply_changes(client, changes, held)
            except EtcdError as exc:
                if isinstance(exc, EtcdUnavailable):
                    raise  # the scratch member, not the changes
                raise RestoreFailed(f"the scratch member refused a replayed change: {exc}") from exc
            head = await client.current_revision()
            if head != target:
                raise RestoreFailed(f"replaying the deltas reached revision {head}, not {target}")
            if compact_to:
                await _compact(client, compact_to)
            found = await client.hash_kv(url, target)
            yield KvHash(found.hash, target, found.compact_revision)
            nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise sole_error(group) from None


async def _compact(client: EtcdClient, revision: int) -> None:
    try:
        await client.compact(revision)
    except Compacted:
        pass  # the snapshot's own history was compacted that far already


async def apply_changes(client: EtcdClient, changes: Sequence[Change], leases: Collection[int] = ()) -> None:
    """One transaction per original revision, so the revisions come out the same; a put keeps
    its lease when it is one of `leases` (granted in the scratch member)."""
    batch: list[TxnOp] = []
    at = None
    for change in changes:
        if at is not None and change.revision != at:
            await client.txn(success=batch)
            batch = []
        at = change.revision
        if change.value is None:
            batch.append(Delete(change.key))
        else:
            batch.append(Put(change.key, change.value, lease=replayed_lease(change, leases)))
    if batch:
        await client.txn(success=batch)


async def _keep_alive(client: EtcdClient, leases: Collection[int]) -> None:
    alive = sorted(leases)
    while alive:
        ttls = await client.lease_keep_alive(alive)
        alive = [lease for lease in alive if ttls.get(lease, 0) > 0]
        if alive:
            await trio.sleep(max(min(ttls[lease] for lease in alive) / 3, SHORTEST_REFRESH))
    await trio.sleep_forever()

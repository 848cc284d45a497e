"""Replaying delta changes into a scratch member (supervisor/etcd/replay.py), against real etcd:
leases are granted with their original IDs and TTLs, puts keep them, and every lease of the
member, the snapshot's included, outlives the replay's block even when its TTL is shorter."""

from __future__ import annotations

import trio

from actors.backup.deltas import Change
from actors.backup.leases import GONE_LEASE_TTL, LEASE_GONE
from supervisor.etcd import open_etcd_client
from supervisor.etcd.replay import replaying
from tests.harness.etcd import EtcdCluster
from tests.harness.poll import eventually

SHORT = 3  # seconds: shorter than the replay's block below


async def test_a_replay_restores_leases_and_keeps_them_alive_until_its_snapshot(
    one_member: EtcdCluster, asyncio_loop: None
) -> None:
    (url,) = one_member.endpoints
    async with open_etcd_client([url]) as client:
        snapshot_lease = await client.lease_grant(SHORT)  # as if restored from the snapshot
        base = await client.put(b"/r/snap", b"v", lease=snapshot_lease)
        recorded, gone, unrecorded = 0x15A, 0x15B, 0x15C
        changes = [
            Change(base + 1, b"/r/a", b"1", lease=recorded, lease_ttl=SHORT),
            Change(base + 2, b"/r/a", None),
            Change(base + 2, b"/r/b", b"2", lease=snapshot_lease, lease_ttl=SHORT),
            Change(base + 3, b"/r/c", b"3", lease=gone, lease_ttl=LEASE_GONE),
            Change(base + 4, b"/r/d", b"4", lease=unrecorded),  # a chunk from before leases were
            Change(base + 5, b"/r/e", b"5", lease=recorded, lease_ttl=SHORT),
        ]
        target = base + 5
        async with replaying(client, url, changes, target) as kv_hash:
            await trio.sleep(SHORT + 2)  # the scratch's snapshot would be taken here
            assert await client.current_revision() == target, "no lease expired during the block"
            leases = {kv.key: kv.lease for kv in await client.range(b"/r/", b"/r0")}
        assert leases == {
            b"/r/snap": snapshot_lease,
            b"/r/b": snapshot_lease,
            b"/r/c": gone,
            b"/r/d": 0,
            b"/r/e": recorded,
        }
        assert kv_hash.hash == (await client.hash_kv(url, target)).hash and kv_hash.revision == target
        assert await client.lease_granted_ttl(recorded) == SHORT
        assert await client.lease_granted_ttl(gone) == GONE_LEASE_TTL
        assert await client.lease_granted_ttl(unrecorded) is None
        # Nothing keeps them alive after the block: they expire, and their keys with them.
        await eventually(
            lambda: client.range(b"/r/", b"/r0"),
            lambda kvs: {kv.key for kv in kvs} <= {b"/r/c", b"/r/d"},  # /r/c's lease lasts longer
            within=SHORT + 10,
            what="expiry",
        )

"""Leases in delta backups, on real etcd: keys put with leases after the full snapshot (leases
kept alive, left to expire, revoked, and one granted before the snapshot) come back from a
restore to a revision with their lease IDs, the restored store hashes as the original did at
that revision, and a lease nobody keeps alive on the restored cluster expires its keys."""

from __future__ import annotations

import trio

from actors.model import LocalStore, StoreSpec
from supervisor.etcd import FutureRevision, open_etcd_client
from supervisor.local.backups import local_store_opener
from tests.backup.test_deltas import (
    _verified,
    children_for,
    deltas_base,
    follower_started,
    restored_at,
    stored_chunks,
    with_backups,
)
from tests.chaos.lifecycle import open_local_supervisor, resource
from tests.harness.clock import SteppedClock
from tests.harness.poll import eventually

EVERYTHING = (b"\0", b"\0")


async def test_restored_keys_keep_their_leases_and_expire_without_keep_alive(tmp_path):
    directory = tmp_path / "backups"
    store = StoreSpec(local=LocalStore(str(directory)))
    source = with_backups(resource("source", size=3), store)
    clock = SteppedClock()  # one scheduled backup only: the workload is in the deltas alone
    async with open_local_supervisor(
        tmp_path / "state", children=children_for(tmp_path, clock), stores=local_store_opener(tmp_path, {})
    ) as sup:
        await sup.fleet.apply([source])
        status = await sup.wait_healthy(source.ref, 3)
        urls = [m.client_url for m in status.members]
        async with open_etcd_client(urls) as etcd, trio.open_nursery() as nursery:
            in_snapshot = await etcd.lease_grant(60)
            first = await etcd.put(b"snap/k", b"before the snapshot", lease=in_snapshot)
            kept = await etcd.lease_grant(15)
            nursery.start_soon(_keep_alive, etcd, [in_snapshot, kept])
            clock.next_minute()
            status = await sup.wait_for(source.ref, lambda s: _verified(s) >= first, timeout=60)
            snapshot_key = status.backup.last_successful_backup.key
            await follower_started(etcd, directory, source.ref)

            expiring, revoked = await etcd.lease_grant(2), await etcd.lease_grant(60)
            await etcd.put(b"kept/a", b"1", lease=kept)
            await etcd.put(b"exp/a", b"1", lease=expiring)
            await etcd.put(b"exp/b", b"1", lease=expiring)
            await etcd.put(b"rev/a", b"1", lease=revoked)
            await etcd.put(b"snap/k2", b"after the snapshot", lease=in_snapshot)
            alive = await etcd.put(b"kept/a", b"2", lease=kept)  # every lease has keys here
            # The follower asks a lease's TTL as it writes a put with it; a lease revoked before
            # that is recorded as gone (actors/backup/leases.py). This one is revoked once the
            # puts are stored, so its granted TTL is what a restore before the revoke gets back.
            await eventually(
                lambda: deltas_base(directory, source.ref, alive),
                lambda base: base is not None,
                within=30,
                every=0.05,
                what=f"deltas past revision {alive}",
            )
            await etcd.lease_revoke(revoked)
            await eventually(lambda: etcd.get(b"exp/a"), lambda v: v is None, within=30, what="expiry")
            last = await etcd.put(b"plain", b"after the expiry")
            targets = (alive, last)
            states = {t: await etcd.range(*EVERYTHING, revision=t) for t in targets}
            hashes = {t: await _hash_at(etcd, urls[0], t) for t in targets}
            nursery.cancel_scope.cancel()
        await eventually(
            lambda: deltas_base(directory, source.ref, last),
            lambda base: base is not None,
            within=30,
            every=0.2,
            what=f"deltas past revision {last}",
        )
        # The follower recorded each lease's granted TTL beside its puts.
        recorded = {c.key: c.lease_ttl for c in stored_chunks(directory, source.ref)[1] if c.lease}
        assert recorded[b"kept/a"] == 15 and recorded[b"rev/a"] == 60 and recorded[b"snap/k2"] == 60

        restored = [restored_at(store, snapshot_key, t) for t in targets]
        await sup.fleet.apply([source, *restored])
        for res, target in zip(restored, targets, strict=True):
            status = await sup.wait_healthy(res.ref, 1, timeout=120)
            async with open_etcd_client([m.client_url for m in status.members]) as etcd:
                # Every key as it was, lease IDs, revisions and versions included (the restored
                # cluster may have moved on since: leases expire there too).
                assert await etcd.range(*EVERYTHING, revision=target) == states[target], f"at {target}"
                assert await _hash_at(etcd, status.members[0].client_url, target) == hashes[target]
                if target != alive:
                    continue
                assert await etcd.lease_granted_ttl(in_snapshot) == 60
                assert await etcd.lease_granted_ttl(revoked) == 60  # revoked only after this revision
                # A client that kept its lease alive goes on doing so by the same ID.
                assert (await etcd.lease_keep_alive([in_snapshot]))[in_snapshot] == 60
                # A lease nobody keeps alive on the restored cluster expires there, with its keys.
                await eventually(
                    lambda etcd=etcd: etcd.get(b"exp/a"), lambda v: v is None, within=30, what="expiry"
                )
                assert await etcd.current_revision() > target


async def _keep_alive(etcd, leases) -> None:
    while True:
        await etcd.lease_keep_alive(leases)
        await trio.sleep(1.0)


async def _hash_at(etcd, url, revision) -> int:
    """HashKV of the member at `url` at `revision`, once it has applied it."""

    async def hash_once_applied() -> int | None:
        try:
            return (await etcd.hash_kv(url, revision)).hash
        except FutureRevision:
            return None

    return await eventually(
        hash_once_applied, lambda h: h is not None, within=20, what=f"HashKV at revision {revision}"
    )

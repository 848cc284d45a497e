"""Quorum-loss recovery on real etcd processes (spec.disasterRecovery).

A majority killed with its data deleted can never return: Manual reports it and waits, and
Automatic rebuilds from the most advanced survivor (--force-new-cluster), then grows back by
learners. Every write acknowledged at or below the revision the survivor had is kept; the
status and the Event say that revision and the last one the supervisor saw. A frozen majority
(SIGSTOP) is not a loss: nothing is rebuilt, and the cluster returns when it resumes. With no
member's data left, Automatic rebuilds from the newest verified backup and its deltas.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from actors.backup.deltas import deltas_prefix, parse_chunk_key
from actors.model import (
    BackupSpec,
    ClusterRef,
    ClusterResource,
    ClusterSpec,
    ClusterStatus,
    DisasterRecoverySpec,
    LocalStore,
    MemberStatus,
    RecoveryMode,
    RecoveryPath,
    Role,
    StoreSpec,
)
from supervisor.etcd.client import open_etcd_client
from supervisor.etcd.errors import EtcdError
from supervisor.local.backups import local_backups, local_store_opener
from supervisor.local.deltas import local_deltas
from tests.chaos.lifecycle import LocalSupervisor, follow_members, is_healthy, open_local_supervisor, resource
from tests.harness.history import KvWorkload
from tests.harness.poll import eventually, more_acknowledged
from tests.harness.procs import etcd_pids_under


def with_mode(res: ClusterResource, mode: RecoveryMode, generation: int = 1) -> ClusterResource:
    spec: ClusterSpec = attrs.evolve(res.spec, disaster_recovery=DisasterRecoverySpec(mode))
    return attrs.evolve(res, spec=spec, generation=generation)


@attrs.define
class RevisionWriter:
    """Writes key after key, remembering each acknowledged write with its revision."""

    endpoints: list[str]
    acked: list[tuple[bytes, bytes, int]] = attrs.field(factory=list)

    async def run(self) -> None:
        async with open_etcd_client(self.endpoints, call_timeout=1.0) as client:
            n = 0
            while True:
                client.set_endpoints(self.endpoints)
                key, value = f"dr/{n:06d}".encode(), os.urandom(8).hex().encode()
                try:
                    self.acked.append((key, value, await client.put(key, value)))
                except EtcdError:
                    pass  # not acknowledged: never counted
                n += 1
                await trio.sleep(0.01)

    async def wait_for_more(self, count: int = 20, *, timeout: float = 30) -> None:
        await more_acknowledged(self.acked, count, within=timeout)

    async def missing(self, acked: list[tuple[bytes, bytes, int]]) -> list[bytes]:
        async with open_etcd_client(self.endpoints, call_timeout=10.0) as client:
            stored = {kv.key: kv.value for kv in await client.range(b"dr/", b"dr0")}
        return [key for key, value, _ in acked if stored.get(key) != value]


def lose(sup: LocalSupervisor, ref: ClusterRef, members: list[MemberStatus]) -> list[str]:
    """SIGKILL these members and delete their data, with no checkpoint in between: the supervisor
    (in this trio run) never sees one of them stopped with its data still there. Their IDs."""
    for m in members:
        assert m.pid is not None
        os.kill(m.pid, signal.SIGKILL)
        shutil.rmtree(sup.runtime.member_dir(ref, m.name) / "data")
    return [m.id for m in members]


def recovered(sup: LocalSupervisor, ref: ClusterRef) -> list[str]:
    return [
        msg for r, reason, msg in sup.recorder.events if r == ref and reason.startswith("QuorumRecovered")
    ]


async def check_survivor_recovery(
    sup: LocalSupervisor, demo: ClusterResource, writer: RevisionWriter, lost: list[str], history: Path
) -> str:
    """The cluster comes back whole from `survivor`, every write it had kept, the loss reported."""
    ref, size = demo.ref, demo.spec.size
    # Enough operations to outlast a slow regrowth (a held-off step, a loaded machine): the
    # workload must still be running when the test asks it for more.
    workload = KvWorkload(endpoints=[], max_operations=20_000)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow_members, sup, ref, workload)
        # Client load while the cluster regrows by learners: its history must be linearizable.
        status = await sup.wait_for(ref, lambda s: s.last_recovery is not None, timeout=60)
        workload.endpoints[:] = [m.client_url for m in status.members if m.role is not Role.LEARNER]
        nursery.start_soon(workload.run)
        status = await sup.wait_for(
            ref, lambda s: is_healthy(s, size) and not set(lost) & {m.id for m in s.members}, timeout=120
        )
        await writer.wait_for_more()
        await workload.wait_for_more()
        nursery.cancel_scope.cancel()
    rec = status.last_recovery
    assert rec is not None and rec.path is RecoveryPath.SURVIVOR
    survivor = rec.source
    assert rec.last_observed_revision >= rec.revision > 0
    (event,) = recovered(sup, ref)
    assert f"from the most advanced survivor {survivor} at revision {rec.revision}" in event
    assert f"last observed revision {rec.last_observed_revision}" in event
    kept = [w for w in writer.acked if w[2] <= rec.revision]
    assert len(kept) >= 20 and await writer.missing(kept) == []
    after = writer.acked[-20:]  # acknowledged once the cluster was whole again
    assert await writer.missing(after) == []
    verdict = await workload.check(history)
    assert verdict.ok, verdict.report
    return survivor


async def test_manual_waits_a_frozen_majority_returns_and_automatic_rebuilds_from_the_survivor(tmp_path):
    async with open_local_supervisor(tmp_path) as sup:
        demo = with_mode(resource(size=3), RecoveryMode.MANUAL)
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        ids = {m.name: m.id for m in status.members}
        writer = RevisionWriter([m.client_url for m in status.members])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            await writer.wait_for_more()

            # 1. A frozen majority (the leader among it) is not a loss: no recovery, and it returns.
            frozen = [m for m in status.members if m.role is Role.LEADER]
            frozen += [m for m in status.members if m.role is Role.FOLLOWER][:1]
            for m in frozen:
                os.kill(m.pid, signal.SIGSTOP)
            await sup.wait_for(demo.ref, lambda s: s.message.startswith("quorum lost: "), timeout=30)
            await trio.sleep(5)  # well inside the bound; no recovery may start meanwhile
            assert "lost for good" not in sup.recorder.statuses[demo.ref].message
            for m in frozen:
                os.kill(m.pid, signal.SIGCONT)
            status = await sup.wait_healthy(demo.ref, 3, timeout=60)
            assert {m.name: m.id for m in status.members} == ids and recovered(sup, demo.ref) == []
            await writer.wait_for_more()

            # 2. Two of three lose their data: Manual says so and waits.
            survivor = next(m.name for m in status.members if m.role is Role.FOLLOWER)
            lost = lose(sup, demo.ref, [m for m in status.members if m.name != survivor])
            await sup.wait_for(demo.ref, lambda s: "lost for good" in s.message, timeout=30)
            await trio.sleep(2)
            status = sup.recorder.statuses[demo.ref]
            assert "Manual: waiting for a person" in status.message and status.last_recovery is None
            assert recovered(sup, demo.ref) == []

            # 3. Switched to Automatic, it rebuilds from the survivor.
            await sup.fleet.apply([with_mode(demo, RecoveryMode.AUTOMATIC, generation=2)])
            nursery.start_soon(follow_members, sup, demo.ref, writer)
            recovered_from = await check_survivor_recovery(sup, demo, writer, lost, tmp_path / "history")
            assert recovered_from == survivor
            nursery.cancel_scope.cancel()
    assert etcd_pids_under(tmp_path) == []


async def test_automatic_rebuilds_five_members_from_the_most_advanced_of_two_survivors(tmp_path):
    async with open_local_supervisor(tmp_path) as sup:
        demo = with_mode(resource(size=5), RecoveryMode.AUTOMATIC)
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 5, timeout=90)
        writer = RevisionWriter([m.client_url for m in status.members])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            nursery.start_soon(follow_members, sup, demo.ref, writer)
            await writer.wait_for_more(40)
            followers = [m for m in status.members if m.role is Role.FOLLOWER]
            keep = {followers[0].name, followers[1].name}
            lost = lose(sup, demo.ref, [m for m in status.members if m.name not in keep])  # the leader too
            survivor = await check_survivor_recovery(sup, demo, writer, lost, tmp_path / "history")
            assert survivor in keep
            nursery.cancel_scope.cancel()
    assert etcd_pids_under(tmp_path) == []


async def test_automatic_rebuilds_from_the_newest_verified_backup_and_its_deltas_when_all_data_is_lost(
    tmp_path,
):
    store = StoreSpec(local=LocalStore(str(tmp_path / "backups")))
    demo = with_mode(resource(size=3), RecoveryMode.AUTOMATIC)
    # One full backup at once, the next a minute later: the writes after the first are in the
    # deltas only when every member is lost.
    backup_spec = BackupSpec(schedule="*/30 * * * *", store=store, delta_period="1s")
    demo = attrs.evolve(demo, spec=attrs.evolve(demo.spec, backup=backup_spec))

    def children(runtime):
        scratch, clock = tmp_path / "scratch", half_hourly_clock()
        return [
            local_backups(runtime, manifest_dir=tmp_path, scratch_dir=scratch, clock=clock, wake_every=0.5),
            local_deltas(runtime, manifest_dir=tmp_path, scratch_dir=scratch, clock=clock),
        ]

    stores = local_store_opener(tmp_path, {})
    async with open_local_supervisor(tmp_path / "state", children=children, stores=stores) as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        writer = RevisionWriter([m.client_url for m in status.members])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer.run)
            status = await sup.wait_for(demo.ref, lambda s: verified_revision(s) > 0, timeout=60)
            backup = status.backup.last_successful_backup
            await writer.wait_for_more(100)  # after the snapshot: only the deltas hold these
            nursery.cancel_scope.cancel()
        async with open_etcd_client(writer.endpoints) as etcd:  # a key with a lease, in the deltas only
            lease = await etcd.lease_grant(600)
            reached = await etcd.put(b"leased", b"v", lease=lease)
        status = await lose_all_once_deltas_reach(sup, demo.ref, tmp_path / "backups", reached)
        rec = status.last_recovery
        assert rec is not None and rec.path is RecoveryPath.BACKUP and rec.source.startswith("default/demo/")
        assert rec.revision >= reached > backup.revision and rec.last_observed_revision >= rec.revision
        (event,) = recovered(sup, demo.ref)
        assert f"with its delta backups at revision {rec.revision}" in event
        writer.endpoints[:] = [m.client_url for m in status.members]
        assert len(writer.acked) >= 100 and await writer.missing(writer.acked) == []
        async with open_etcd_client(writer.endpoints) as etcd:
            assert await etcd.current_revision() == rec.revision  # the original's revisions, kept
            assert [kv.lease for kv in await etcd.range(b"leased")] == [lease]  # and its lease
            assert await etcd.lease_granted_ttl(lease) == 600
    assert etcd_pids_under(tmp_path) == []


async def lose_all_once_deltas_reach(
    sup: LocalSupervisor, ref: ClusterRef, backups: Path, reached: int
) -> ClusterStatus:
    """Once the delta chunks in `backups` reach revision `reached`, every member lost with its
    data; the status once the cluster is whole again, of new members only."""
    await eventually(
        lambda: deltas_reach(backups, ref),
        lambda reach: reach >= reached,
        within=30,
        what=f"deltas reaching revision {reached}",
    )
    members = list(sup.recorder.statuses[ref].members)
    lost = lose(sup, ref, members)
    return await sup.wait_for(
        ref,
        lambda s: is_healthy(s, len(members)) and not set(lost) & {m.id for m in s.members},
        timeout=120,
    )


def half_hourly_clock() -> Callable[[], float]:
    """Cron half-hours every minute, the first slot three seconds from now."""
    start, speed = time.time(), 30.0
    slot = (int(start // 1800) + 2) * 1800
    return lambda: slot - 3 * speed + (time.time() - start) * speed


def deltas_reach(directory: Path, ref: ClusterRef) -> int:
    refs = [
        parse_chunk_key(str(p.relative_to(directory))) for p in (directory / deltas_prefix(ref)).glob("*")
    ]
    return max((r.last for r in refs if r is not None), default=0)


def verified_revision(status: ClusterStatus) -> int:
    last = status.backup.last_successful_backup if status.backup else None
    return last.revision if last is not None and last.verified else 0

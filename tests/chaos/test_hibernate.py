"""spec.hibernate on real etcd processes, locally: a final verified backup, every process stopped
with its data directory kept (phase Hibernated, nothing restarted meanwhile); woken from the data
directories with every key and the revision as they were; hibernated again, its data directories
deleted, and woken from the final backup with every key and the revision as they were (in the
default disasterRecovery mode, Manual: the backup was taken for this)."""

from __future__ import annotations

import shutil

import attrs
import trio

from actors.model import (
    BackupSpec,
    ClusterResource,
    ClusterStatus,
    LocalStore,
    Phase,
    RecoveryPath,
    StoreSpec,
)
from supervisor.etcd.client import open_etcd_client
from supervisor.local.backups import local_backups, local_store_opener
from tests.chaos.lifecycle import LocalSupervisor, is_healthy, open_local_supervisor, resource
from tests.harness.procs import etcd_pids_under


def hibernating(demo: ClusterResource, on: bool, generation: int) -> ClusterResource:
    return attrs.evolve(demo, spec=attrs.evolve(demo.spec, hibernate=on), generation=generation)


async def contents(status: ClusterStatus) -> tuple[dict[bytes, bytes], int]:
    """Every key under hib/ with its value, and the store's revision."""
    async with open_etcd_client([m.client_url for m in status.members], call_timeout=5.0) as etcd:
        kvs = await etcd.range(b"hib/", b"hib0")
        return {kv.key: kv.value for kv in kvs}, await etcd.current_revision()


async def write(status: ClusterStatus, first: int, count: int) -> None:
    async with open_etcd_client([m.client_url for m in status.members], call_timeout=5.0) as etcd:
        for n in range(first, first + count):
            await etcd.put(f"hib/{n:05d}".encode(), f"value {n}".encode())


async def hibernate(sup: LocalSupervisor, demo: ClusterResource, generation: int) -> ClusterStatus:
    await sup.fleet.apply([hibernating(demo, True, generation)])
    asleep = await sup.wait_for(demo.ref, lambda s: s.phase is Phase.HIBERNATED, timeout=60)
    assert all(m.pid is None and not m.healthy for m in asleep.members), asleep.members
    return asleep


async def test_hibernate_then_wake_from_the_data_dirs_and_then_from_the_final_backup(tmp_path) -> None:
    store = StoreSpec(local=LocalStore(str(tmp_path / "backups")))
    demo = resource(size=3)
    demo = attrs.evolve(demo, spec=attrs.evolve(demo.spec, backup=BackupSpec(store=store)))
    state = tmp_path / "state"

    def children(runtime):  # type: ignore[no-untyped-def]
        return [
            local_backups(runtime, manifest_dir=tmp_path, scratch_dir=tmp_path / "scratch", wake_every=0.5)
        ]

    stores = local_store_opener(tmp_path, {})
    async with open_local_supervisor(state, children=children, stores=stores) as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        await write(status, 0, 200)
        before, revision = await contents(status)
        ids = {m.name: m.id for m in status.members}

        # Hibernate: the final backup (verified, at the last revision), then every process stops.
        asleep = await hibernate(sup, demo, 2)
        final = asleep.backup.last_successful_backup if asleep.backup else None
        assert final is not None and final.verified and final.revision == revision
        (stopped,) = [m for r, reason, m in sup.recorder.events if r == demo.ref and reason == "Hibernated"]
        assert f"final backup {final.key}" in stopped
        assert etcd_pids_under(state) == []
        for name in ids:
            assert (sup.runtime.member_dir(demo.ref, name) / "data" / "member").is_dir()
        events = len(sup.recorder.events)
        await trio.sleep(3)  # ten ticks: nothing is restarted, no backup is taken
        assert sup.recorder.statuses[demo.ref].phase is Phase.HIBERNATED and etcd_pids_under(state) == []
        later = [reason for r, reason, _ in sup.recorder.events[events:] if r == demo.ref]
        assert later == [], later

        # Woken from the data dirs: the same members, every key, the same revision.
        await sup.fleet.apply([hibernating(demo, False, 3)])
        awake = await sup.wait_for(demo.ref, lambda s: is_healthy(s, 3), timeout=60)
        assert {m.name: m.id for m in awake.members} == ids
        assert await contents(awake) == (before, revision)
        assert awake.last_recovery is None

        # More writes, hibernated again (a new final backup), every data dir deleted: woken from
        # that backup, though spec.disasterRecovery is Manual.
        await write(awake, 200, 100)
        before, revision = await contents(awake)
        asleep = await hibernate(sup, demo, 4)
        final = asleep.backup.last_successful_backup if asleep.backup else None
        assert final is not None and final.verified and final.revision == revision
        for name in ids:
            shutil.rmtree(sup.runtime.member_dir(demo.ref, name) / "data")
        await sup.fleet.apply([hibernating(demo, False, 5)])
        awake = await sup.wait_for(demo.ref, lambda s: is_healthy(s, 3), timeout=120)
        recovery = awake.last_recovery
        assert recovery is not None and recovery.path is RecoveryPath.BACKUP and recovery.source == final.key
        assert not set(ids) & {m.name for m in awake.members}  # new members, restored from the backup
        assert await contents(awake) == (before, revision)
    assert etcd_pids_under(tmp_path) == []

"""Scheduled backups of a real etcd cluster to a local directory store, through the backup actor:
snapshots streamed from a follower, read back and restored into a scratch etcd whose HashKV must
match the source's, retention applied, status and Events reporting it all."""

import json
import time

import attrs

from actors.model import BackupSpec, LocalStore, RetentionSpec, StoreSpec
from supervisor.etcd.client import open_etcd_client
from supervisor.local.backups import local_backups
from tests.chaos.lifecycle import open_local_supervisor, resource

# The daemon's wall clock, sped up: one cron minute passes every two real seconds.
SPEED = 30.0


def fast_clock():
    start = time.time()
    # Start two (real) seconds before a minute boundary, so the first slot comes at once.
    offset = 60 - (start % 60) - 2 * SPEED
    return lambda: start + offset + (time.time() - start) * SPEED


def backed_up(tmp_path, store_dir, **retention):
    demo = resource(size=3)
    spec = BackupSpec(
        schedule="* * * * *",
        retention=RetentionSpec(**retention),
        store=StoreSpec(local=LocalStore(str(store_dir))),
    )
    return attrs.evolve(demo, spec=attrs.evolve(demo.spec, backup=spec))


async def test_scheduled_backups_are_verified_kept_by_retention_and_reported(tmp_path):
    store_dir = tmp_path / "backups"
    demo = backed_up(tmp_path, store_dir, keep=2)
    clock = fast_clock()

    def children(runtime):
        return [
            local_backups(
                runtime, manifest_dir=tmp_path, scratch_dir=tmp_path / "scratch", clock=clock, wake_every=0.5
            )
        ]

    async with open_local_supervisor(tmp_path / "state", children=children) as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        endpoints = [m.client_url for m in status.members]
        async with open_etcd_client(endpoints) as etcd:
            for i in range(50):
                await etcd.put(f"k{i}".encode(), b"v" * 100)
        three = await sup.wait_for(
            demo.ref, lambda s: "BackupDeleted" in sup.recorder.reasons(demo.ref), timeout=60
        )
        # Retention keep=2: right after the first deletion, two complete backups remain (a
        # backup in flight has no metadata object yet and does not count).
        where = store_dir / "default" / "demo"
        snapshots = sorted(p.name for p in where.glob("*.db") if (where / f"{p.name}.json").exists())
        deleted = [m for _, r, m in sup.recorder.events if r == "BackupDeleted"]
    assert len(snapshots) == 2, snapshots
    assert all(d.split(":")[0].rsplit("/", 1)[-1] < snapshots[0] for d in deleted), (deleted, snapshots)
    last = three.backup.last_successful_backup
    assert last.verified and last.revision > 0 and last.size_bytes > 0
    healthy = {c.type: c for c in three.conditions}["BackupHealthy"]
    assert healthy.status == "True", healthy
    meta = json.loads((where / f"{snapshots[-1]}.json").read_text())
    assert meta["verified"] is True and meta["sizeBytes"] == (where / snapshots[-1]).stat().st_size
    # The snapshot came from a follower, never the leader.
    leader = next(m for m in three.members if m.role.value == "leader")
    assert meta["member"] in endpoints and meta["member"] != leader.client_url

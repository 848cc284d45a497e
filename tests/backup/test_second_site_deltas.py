"""Delta backups on a second site (spec.backup.copyTo with deltaPeriod), on real etcd: while the
second store is missing, the deltas go on in the first and BackupHealthy says the second site
fails; once it is there, the chunks it lacks are caught up, and with the first store gone a new
cluster is restored from the second alone to revisions between snapshots, key for key. Retention
prunes the chunks no kept snapshot can use, in both stores."""

from __future__ import annotations

import json
import random
import shutil

import attrs
import trio

from actors.backup.deltas import covered_to, parse_chunk_key
from actors.model import BackupSpec, CopySpec, LocalStore, RetentionSpec, S3Store, StoreSpec
from supervisor.etcd import open_etcd_client
from tests.backup.test_deltas import (
    PitWorkload,
    assert_restored_at,
    deltas_base,
    follower_started,
    restored_at,
    running,
)
from tests.backup.test_second_site_and_locks import condition, s3_credentials_file
from tests.chaos.lifecycle import resource
from tests.harness.poll import eventually


def second_site_reach(s3, bucket, prefix, base):
    """How far the second store's chunks reach from `base` without a gap."""
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}default/source/deltas/").get("Contents", [])
    refs = [c for o in listed if (c := parse_chunk_key(o["Key"]))]
    return covered_to(refs, base)


async def test_deltas_reach_the_second_site_after_its_outage_and_restore_from_it_alone(tmp_path, s3_server):
    bucket, prefix = "dr-deltas", "dr/"  # not created yet: the second site is down
    secret = s3_credentials_file(tmp_path / "dr-creds", s3_server)
    second = StoreSpec(
        s3=S3Store(bucket=bucket, prefix=prefix, endpoint=s3_server.endpoint, credentials_secret=secret)
    )
    first = tmp_path / "backups"
    backup = BackupSpec(
        schedule="* * * * *",
        store=StoreSpec(local=LocalStore(str(first))),
        delta_period="1s",
        copy_to=CopySpec(second),
    )
    source = resource("source", size=3)
    source = attrs.evolve(source, spec=attrs.evolve(source.spec, backup=backup))
    async with running(tmp_path, source) as (sup, status):
        workload = PitWorkload(random.Random(32))
        async with open_etcd_client([m.client_url for m in status.members]) as etcd:
            await follower_started(etcd, first, source.ref)
            await workload.run(etcd, 100)
            # The second site is down: the deltas go on in the first store, and the health says so.
            failing = await sup.wait_for(
                source.ref,
                lambda s: (
                    condition(s).reason == "SecondSiteFailing"
                    and any(r == "DeltaCopyFailed" for _, r, _m in sup.recorder.events)
                ),
                timeout=60,
            )
            assert "dr-deltas" in condition(failing).message
            s3_server.create_bucket(bucket)  # back: what it lacks is caught up
            await workload.run(etcd, 100)
        history = workload.history
        last = history[-1][0]
        base = await eventually(
            lambda: deltas_base(first, source.ref, last),
            lambda found: found is not None,
            within=30,
            every=0.2,
            what=f"deltas past revision {last} in the first store",
        )
        s3 = s3_server.boto3_client()
        await eventually(
            lambda: second_site_reach(s3, bucket, prefix, base),
            lambda reach: reach >= last,
            within=60,
            every=0.5,
            what=f"the second site's deltas from revision {base} past {last}",
        )
        caught_up = await sup.wait_for(
            source.ref, lambda s: condition(s).reason == "BackupsCurrent", timeout=90
        )
        assert condition(caught_up).status == "True"
        assert not any(r == "DeltaBackupFailed" for _, r, _m in sup.recorder.events)
        assert any(r == "DeltaBackupCopied" for _, r, _m in sup.recorder.events)
        snapshot_key = caught_up.backup.last_successful_backup.key  # names the cluster
        # The first site is gone: only the second is left to restore from.
        shutil.rmtree(first)
        later = [rev for rev, _, _ in history if rev > base]
        targets = [later[len(later) // 3], last]
        restored = [restored_at(second, snapshot_key, t) for t in targets]
        await sup.fleet.apply([source, *restored])
        for res, target in zip(restored, targets, strict=True):
            await assert_restored_at(sup, res, target, history)


PRUNED_IN = {"local directory", "dr-pruned"}


def pruned_in(events):
    """Which of the two stores retention deleted delta chunks from, by the Events."""
    return {where for _, r, m in events if r == "DeltaBackupsDeleted" for where in PRUNED_IN if where in m}


async def busy(etcd):
    while True:
        await etcd.put(b"k", b"v")
        await trio.sleep(0.1)


async def test_retention_prunes_the_chunks_no_kept_snapshot_can_use_in_both_stores(tmp_path, s3_server):
    bucket = s3_server.create_bucket("dr-pruned")
    secret = s3_credentials_file(tmp_path / "dr-creds", s3_server)
    second = StoreSpec(s3=S3Store(bucket=bucket, endpoint=s3_server.endpoint, credentials_secret=secret))
    first = tmp_path / "backups"
    backup = BackupSpec(
        schedule="* * * * *",
        retention=RetentionSpec(keep=1),
        store=StoreSpec(local=LocalStore(str(first))),
        delta_period="1s",
        copy_to=CopySpec(second),
    )
    source = resource("source", size=1)
    source = attrs.evolve(source, spec=attrs.evolve(source.spec, backup=backup))
    async with (
        running(tmp_path, source) as (sup, status),
        open_etcd_client([m.client_url for m in status.members]) as etcd,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(busy, etcd)  # chunks keep coming while snapshots are taken and pruned
        await sup.wait_for(source.ref, lambda _: pruned_in(sup.recorder.events) == PRUNED_IN, timeout=120)
        nursery.cancel_scope.cancel()
    # Once stopped: every chunk left holds revisions after the oldest verified snapshot kept.
    s3 = s3_server.boto3_client()
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="default/source/")["Contents"]]
    there = {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in listed if k.endswith(".db.json")}
    here = {str(p.relative_to(first)): p.read_bytes() for p in first.rglob("*.db.json")}
    local_chunks = [str(p.relative_to(first)) for p in first.rglob("*.jsonl")]
    for metadata, keys in ((here, local_chunks), (there, listed)):
        oldest = min(json.loads(m)["revision"] for m in metadata.values() if json.loads(m)["verified"])
        chunks = [c for k in keys if (c := parse_chunk_key(k))]
        assert all(c.last > oldest for c in chunks), (oldest, chunks)

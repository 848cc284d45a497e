"""Restoring a new cluster from a backup (spec.restore) on real etcd: the seed starts on the
backup's data with a new cluster ID, the cluster grows by learners, and every key is there; a
missing backup, or one whose restored data hash differently from its record, leaves the cluster
Failed with the reason and nothing half-built."""

import json

import attrs

from actors.model import BackupSpec, ClusterRef, LocalStore, RestoreSpec, StoreSpec
from supervisor.etcd.client import open_etcd_client
from supervisor.local.backups import local_backups, local_store_opener
from tests.chaos.lifecycle import open_local_supervisor, resource
from tests.harness.clock import fast_clock


async def write_keys(etcd, count):
    """key-<i> = value-<i> for i < count, each its own revision; what was written."""
    written = {f"key-{i}".encode(): f"value-{i}".encode() for i in range(count)}
    for k, v in written.items():
        await etcd.put(k, v)
    return written


def backed_up_past(revision):
    """A status predicate: a successful backup holds changes past `revision`."""
    return lambda s: (
        s.backup is not None
        and s.backup.last_successful_backup is not None
        and s.backup.last_successful_backup.revision > revision
    )


def with_spec(res, **changes):
    return attrs.evolve(res, spec=attrs.evolve(res.spec, **changes))


async def test_a_new_cluster_restored_from_a_backup_has_every_key_and_a_new_identity(tmp_path):
    store = StoreSpec(local=LocalStore(str(tmp_path / "backups")))
    source = with_spec(resource("source", size=3), backup=BackupSpec(schedule="* * * * *", store=store))
    clock = fast_clock()

    def children(runtime):
        scratch = tmp_path / "scratch"
        return [
            local_backups(runtime, manifest_dir=tmp_path, scratch_dir=scratch, clock=clock, wake_every=0.5)
        ]

    stores = local_store_opener(tmp_path, {})
    async with open_local_supervisor(tmp_path / "state", children=children, stores=stores) as sup:
        await sup.fleet.apply([source])
        status = await sup.wait_healthy(source.ref, 3)
        async with open_etcd_client([m.client_url for m in status.members]) as etcd:
            written = await write_keys(etcd, 200)
            source_ids = {m.id for m in (await etcd.member_list())}
        backed = await sup.wait_for(source.ref, backed_up_past(len(written)), timeout=60)
        key = backed.backup.last_successful_backup.key

        restored = with_spec(resource("restored", size=3), restore=RestoreSpec(store=store, key=key))
        await sup.fleet.apply([source, restored])
        status = await sup.wait_healthy(restored.ref, 3, timeout=120)
        async with open_etcd_client([m.client_url for m in status.members]) as etcd:
            got = {kv.key: kv.value for kv in await etcd.range(b"key-", b"key.")}
            members = await etcd.member_list()

        # The same snapshot, but its metadata records another HashKV: the restored seed's hash
        # differs, so the restore fails with both hashes named and leaves no member behind.
        meta_path = tmp_path / "backups" / f"{key}.json"
        meta = json.loads(meta_path.read_text())
        meta_path.write_text(json.dumps({**meta, "hashKV": meta["hashKV"] + 1}))
        tampered = with_spec(resource("tampered", size=1), restore=RestoreSpec(store=store, key=key))
        await sup.fleet.apply([source, restored, tampered])
        failed = await sup.wait_for(tampered.ref, lambda s: s.phase.value == "Failed", timeout=60)
        members_dir = tmp_path / "state" / "default" / "tampered" / "members"
        leftovers = list(members_dir.iterdir()) if members_dir.exists() else []

        # The metadata put right, the snapshot's bytes flipped in the store: the restore fails
        # and leaves nothing either.
        meta_path.write_text(json.dumps(meta))
        snapshot_path = tmp_path / "backups" / key
        with snapshot_path.open("r+b") as f:
            f.seek(snapshot_path.stat().st_size // 2)
            middle = f.read(64)
            f.seek(-64, 1)
            f.write(bytes(b ^ 0xFF for b in middle))
        corrupt = with_spec(resource("corrupt", size=1), restore=RestoreSpec(store=store, key=key))
        await sup.fleet.apply([source, restored, tampered, corrupt])
        corrupt_failed = await sup.wait_for(corrupt.ref, lambda s: s.phase.value == "Failed", timeout=60)
        corrupt_dir = tmp_path / "state" / "default" / "corrupt" / "members"
        corrupt_leftovers = list(corrupt_dir.iterdir()) if corrupt_dir.exists() else []
    assert "the restored data differ from backup" in failed.message, failed.message
    assert f"the backup recorded {meta['hashKV'] + 1}" in failed.message, failed.message
    assert leftovers == []
    # The stored object is compressed (the default): its frame's checksum refuses it by name
    # before etcdutl sees a byte (a plain one: etcdutl's digest or ours of the metadata's sha256).
    assert "BackupCorrupt" in corrupt_failed.message, corrupt_failed.message
    assert corrupt_leftovers == []
    assert got == written
    assert {m.id for m in members}.isdisjoint(source_ids)
    reasons = sup.recorder.reasons(restored.ref)
    # The seed's HashKV was checked against the backup's before the restore counted as done.
    assert reasons[:2] == ["RestoreVerified", "RestoredFromBackup"] and reasons.count("LearnerPromoted") == 2


async def test_a_missing_backup_leaves_the_cluster_failed_with_the_reason_and_nothing_built(tmp_path):
    store = StoreSpec(local=LocalStore(str(tmp_path / "empty")))
    (tmp_path / "empty").mkdir()
    missing = with_spec(
        resource("lost", size=3), restore=RestoreSpec(store=store, key="default/x/nothing.db")
    )
    async with open_local_supervisor(tmp_path / "state", stores=local_store_opener(tmp_path, {})) as sup:
        await sup.fleet.apply([missing])
        failed = await sup.wait_for(missing.ref, lambda s: s.phase.value == "Failed", timeout=30)
        members_dir = tmp_path / "state" / "default" / "lost" / "members"
        leftovers = list(members_dir.iterdir()) if members_dir.exists() else []
    assert "not found" in failed.message and "default/x/nothing.db" in failed.message, failed.message
    assert leftovers == []
    assert "RestoreSeedFailed" in sup.recorder.reasons(ClusterRef("default", "lost"))

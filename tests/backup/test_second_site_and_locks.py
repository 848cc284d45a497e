"""A real etcd cluster's scheduled backups, through the backup actor, with a second site
(spec.backup.copyTo) and immutability (spec.backup.immutable) on the real servers: each copy read
back from the second store and checked against the sha256 its metadata records, a second site
that refuses the credentials reported by name while the backups go on, and S3 object lock on
moto keeping backups that retention would otherwise delete."""

import hashlib
import json
import shutil

import attrs

from actors.model import (
    AzureStore,
    BackupSpec,
    CopySpec,
    ImmutableSpec,
    LocalStore,
    RestoreSpec,
    RetentionSpec,
    S3Store,
    StoreSpec,
)
from supervisor.etcd.client import open_etcd_client
from supervisor.local.backups import local_store_opener
from tests.backup.test_local_backups import children_with
from tests.backup.test_restore import backed_up_past, write_keys
from tests.chaos.lifecycle import open_local_supervisor, resource
from tests.harness.clock import fast_clock


def with_backup(res, **fields):
    spec = BackupSpec(schedule="* * * * *", **fields)
    return attrs.evolve(res, spec=attrs.evolve(res.spec, backup=spec))


def condition(status, kind="BackupHealthy"):
    return {c.type: c for c in status.conditions}[kind]


async def backed_up_until(tmp_path, demo, until, *, timeout, environ=None):
    """Run `demo` and its backups until `until(status, events)` holds; that status and every Event."""
    children = children_with(tmp_path, fast_clock(), environ=environ)
    async with open_local_supervisor(tmp_path / "state", children=children) as sup:
        await sup.fleet.apply([demo])
        await sup.wait_healthy(demo.ref, demo.spec.size)
        status = await sup.wait_for(demo.ref, lambda s: until(s, sup.recorder.events), timeout=timeout)
    return status, sup.recorder.events


def s3_credentials_file(path, server, secret=None):
    """A credentials "Secret" as local mode reads one: a file next to the manifest."""
    path.write_text(
        f"AWS_ACCESS_KEY_ID={server.access_key_id}\n"
        f"AWS_SECRET_ACCESS_KEY={secret or server.secret_access_key}\n"
    )
    return path.name


async def test_backups_are_copied_to_a_second_store_verified_there_and_pruned_there_too(tmp_path, s3_server):
    bucket = s3_server.create_bucket("dr-copies")
    # The second store's own credentials, from its own credentialsSecret (the daemon has none).
    secret = s3_credentials_file(tmp_path / "dr-creds", s3_server)
    second = StoreSpec(
        s3=S3Store(bucket=bucket, prefix="dr/", endpoint=s3_server.endpoint, credentials_secret=secret)
    )
    first = tmp_path / "backups"
    demo = with_backup(
        resource(size=3),
        retention=RetentionSpec(keep=2),
        store=StoreSpec(local=LocalStore(str(first))),
        copy_to=CopySpec(second),
    )
    done, events = await backed_up_until(
        tmp_path,
        demo,
        lambda s, events: any(r == "BackupDeleted" and "dr-copies" in m for _, r, m in events),
        timeout=120,
    )
    copied = [m for _, r, m in events if r == "BackupCopied"]
    assert len(copied) >= 3, copied
    assert condition(done).status == "True", condition(done)
    s3 = s3_server.boto3_client()
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="dr/default/demo/")["Contents"]}
    complete = sorted(k for k in keys if k.endswith(".db") and f"{k}.json" in keys)
    assert complete, keys
    for key in complete:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        meta = json.loads(s3.get_object(Bucket=bucket, Key=f"{key}.json")["Body"].read())
        local = first / key.removeprefix("dr/")
        # The copy holds the bytes as stored (compressed: zstd by default), as the first store does.
        assert hashlib.sha256(body).hexdigest() == meta["sha256"] and meta["verified"] is True
        if local.exists():
            assert local.read_bytes() == body
    # Retention keep=2 applied to the second store as to the first.
    deleted_there = [m for _, r, m in events if r == "BackupDeleted" and "dr-copies" in m]
    for message in deleted_there:
        assert f"dr/{message.split(':')[0]}" not in keys


async def test_a_second_site_that_refuses_the_credentials_is_named_while_backups_go_on(tmp_path, s3_server):
    bucket = s3_server.create_bucket("dr-refused")
    secret = s3_credentials_file(tmp_path / "dr-wrong", s3_server, secret="not-the-key")
    second = StoreSpec(s3=S3Store(bucket=bucket, endpoint=s3_server.endpoint, credentials_secret=secret))
    demo = with_backup(
        resource(size=1), store=StoreSpec(local=LocalStore(str(tmp_path / "b"))), copy_to=CopySpec(second)
    )
    failing, events = await backed_up_until(
        tmp_path,
        demo,
        lambda s, _: (
            s.backup is not None
            and s.backup.last_successful_backup is not None
            and condition(s).reason == "SecondSiteFailing"
        ),
        timeout=90,
    )
    healthy = condition(failing)
    assert healthy.status == "False"
    assert "the second store s3 bucket 'dr-refused'" in healthy.message and "credentials" in healthy.message
    # The backup itself succeeded: the status advanced, no failure counted.
    assert failing.backup.last_successful_backup.verified and failing.backup.consecutive_failures == 0
    assert any(r == "BackupCopyFailed" and "dr-refused" in m for _, r, m in events)
    assert not any(r == "BackupFailed" for _, r, _m in events)


async def test_locked_backups_survive_retention_which_says_until_when(tmp_path, s3_server):
    bucket = s3_server.create_bucket("locked-backups", object_lock=True)
    environ = {
        "AWS_ACCESS_KEY_ID": s3_server.access_key_id,
        "AWS_SECRET_ACCESS_KEY": s3_server.secret_access_key,
    }
    store = StoreSpec(s3=S3Store(bucket=bucket, endpoint=s3_server.endpoint))
    demo = with_backup(
        resource(size=1), retention=RetentionSpec(keep=1), store=store, immutable=ImmutableSpec(days=1)
    )
    held, events = await backed_up_until(
        tmp_path,
        demo,
        lambda s, _: s.backup is not None and "2 backups kept past retention" in condition(s).message,
        timeout=120,
        environ=environ,
    )
    s3 = s3_server.boto3_client()
    versions = s3.list_object_versions(Bucket=bucket, Prefix="default/demo/")
    # Retention did not even try: a delete would have left a delete marker (the bucket is versioned).
    assert not versions.get("DeleteMarkers"), versions["DeleteMarkers"]
    assert not any(r == "BackupDeleted" for _, r, _m in events)
    snapshots = [v["Key"] for v in versions["Versions"] if v["Key"].endswith(".db")]
    assert len(snapshots) >= 3, snapshots
    for key in snapshots:
        head = s3.head_object(Bucket=bucket, Key=key)
        meta = json.loads(s3.get_object(Bucket=bucket, Key=f"{key}.json")["Body"].read())
        assert head["ObjectLockMode"] == "COMPLIANCE"
        assert head["ObjectLockRetainUntilDate"].timestamp() == meta["retainUntil"]
    message = condition(held).message
    assert (
        condition(held).status == "True"
        and f"in s3 bucket '{bucket}'" in message
        and "locked until" in message
    )


async def test_a_cluster_restored_from_the_second_sites_copy_has_every_key(tmp_path, azurite_server):
    container = azurite_server.create_container("etcd-dr")
    (tmp_path / "az-creds").write_text(
        f"AZURE_STORAGE_ACCOUNT_NAME={azurite_server.account_name}\n"
        f"AZURE_STORAGE_ACCOUNT_KEY={azurite_server.account_key}\n"
    )
    second = StoreSpec(
        azure=AzureStore(container=container, endpoint=azurite_server.endpoint, credentials_secret="az-creds")
    )
    source = with_backup(
        resource("source", size=1),
        store=StoreSpec(local=LocalStore(str(tmp_path / "b"))),
        copy_to=CopySpec(second),
    )
    children = children_with(tmp_path, fast_clock())
    async with open_local_supervisor(
        tmp_path / "state", children=children, stores=local_store_opener(tmp_path, {})
    ) as sup:
        await sup.fleet.apply([source])
        status = await sup.wait_healthy(source.ref, 1)
        async with open_etcd_client([m.client_url for m in status.members]) as etcd:
            written = await write_keys(etcd, 100)
        copied = await sup.wait_for(
            source.ref,
            lambda s: (
                backed_up_past(len(written))(s)
                and any(
                    r == "BackupCopied" and m.startswith(s.backup.last_successful_backup.key)
                    for _, r, m in sup.recorder.events
                )
            ),
            timeout=90,
        )
        key = copied.backup.last_successful_backup.key
        # The first site is gone: only the copy is left to restore from.
        shutil.rmtree(tmp_path / "b")
        fresh = resource("restored", size=1)
        restored = attrs.evolve(
            fresh, spec=attrs.evolve(fresh.spec, restore=RestoreSpec(store=second, key=key))
        )
        await sup.fleet.apply([source, restored])
        status = await sup.wait_healthy(restored.ref, 1, timeout=120)
        async with open_etcd_client([m.client_url for m in status.members]) as etcd:
            got = {kv.key: kv.value for kv in await etcd.range(b"key-", b"key.")}
    assert got == written

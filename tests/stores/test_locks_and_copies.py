"""Immutable backups and the second site, store by store, on the real servers: S3 object lock on
moto (a bucket made with object lock), and backups copied between stores of different kinds,
checked against the sha256 their metadata records."""

from __future__ import annotations

import json
import time
import uuid

import botocore.exceptions
import pytest

from actors.backup.copies import CopyFailed, sync_copies
from actors.backup.locks import held_note, split_locked
from actors.backup.retention import BackupRecord, expired
from actors.backup.source import taken_at
from actors.errors import StoreError
from actors.model import ClusterRef, LocalStore, S3Store, StoreSpec
from actors.store_port import ObjectStore, S3Credentials
from supervisor.stores import open_store
from supervisor.stores.cloud import Transfer
from supervisor.stores.factory import StoreOptions
from tests.harness.objstore import S3Server
from tests.stores.data import MiB, chunks, drain

DAY = 86400
DEMO = ClusterRef("default", "demo")


def locked_store(
    server: S3Server, bucket: str, days: int, *, part_size: int = 8 * MiB, prefix: str = ""
) -> ObjectStore:
    creds = S3Credentials(server.access_key_id, server.secret_access_key)
    return open_store(
        StoreSpec(s3=S3Store(bucket=bucket, prefix=prefix, endpoint=server.endpoint)),
        credentials=creds,
        lock_days=days,
        options=StoreOptions(transfer=Transfer(part_size=part_size)),
    )


async def test_every_put_to_a_locked_s3_store_carries_a_compliance_lock_until_days_later(s3_server):
    bucket = s3_server.create_bucket(f"lock-{uuid.uuid4().hex[:12]}", object_lock=True)
    store = locked_store(s3_server, bucket, days=3)
    before = time.time()
    snapshot = await store.put_stream("default/demo/a.db", chunks(1 * MiB))
    meta = await store.put_bytes("default/demo/a.db.json", b"{}")
    # One date for every object of one opening (one backup): the metadata records it.
    assert snapshot.retain_until == meta.retain_until
    assert before + 3 * DAY - 1 <= snapshot.retain_until <= time.time() + 3 * DAY
    s3 = s3_server.boto3_client()
    for key in ("default/demo/a.db", "default/demo/a.db.json"):
        # moto's server answers GetObjectRetention with a 500 (not implemented); HeadObject
        # reports the same retention, as S3 does.
        head = s3.head_object(Bucket=bucket, Key=key)
        assert head["ObjectLockMode"] == "COMPLIANCE", head
        assert head["ObjectLockRetainUntilDate"].timestamp() == snapshot.retain_until
        # The lock is real: not even these (owner's) credentials delete the version.
        with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
            s3.delete_object(Bucket=bucket, Key=key, VersionId=head["VersionId"])
    assert await drain(store.get_stream("default/demo/a.db")) == await drain(chunks(1 * MiB))


async def test_a_snapshot_uploaded_in_parts_is_locked_until_its_metadatas_date_and_retention_keeps_it(
    s3_server,
):
    bucket = s3_server.create_bucket(f"lock-{uuid.uuid4().hex[:12]}", object_lock=True)
    store = locked_store(s3_server, bucket, days=2, part_size=5 * MiB, prefix="etcd/")
    older, newer = "default/demo/20260101T000000Z-rev5.db", "default/demo/20260102T000000Z-rev9.db"
    for key, size in ((older, 6 * MiB), (newer, 1000)):
        # As the backup job leaves one: the snapshot, then metadata recording its date.
        stored = await store.put_stream(key, chunks(size))
        meta = {"key": key, "sha256": stored.sha256, "verified": True, "retainUntil": stored.retain_until}
        await store.put_bytes(f"{key}.json", json.dumps(meta).encode())
    s3 = s3_server.boto3_client()
    head = s3.head_object(Bucket=bucket, Key=f"etcd/{older}")
    assert head["ETag"].endswith('-2"'), head["ETag"]  # a multipart upload: 5 MiB + 1 MiB
    recorded = json.loads(await store.get_bytes(f"{older}.json"))["retainUntil"]
    assert head["ObjectLockMode"] == "COMPLIANCE", head
    assert head["ObjectLockRetainUntilDate"].timestamp() == recorded
    with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
        s3.delete_object(Bucket=bucket, Key=f"etcd/{older}", VersionId=head["VersionId"])
    # A retention pass (keep 1) dooms the older backup, and keeps it for its lock.
    now = time.time()
    records = []
    for o in await store.list("default/demo/"):
        if o.key.endswith(".db"):
            until = json.loads(await store.get_bytes(f"{o.key}.json"))["retainUntil"]
            records.append(BackupRecord(o.key, taken_at(o.key, o.modified), True, locked_until=until))
    deletable, kept = split_locked(expired(records, keep=1, max_age=None, now=now), now)
    assert (deletable, [b.key for b in kept]) == ([], [older])
    assert "locked until" in held_note(kept, store.describe())
    assert await drain(store.get_stream(older)) == await drain(chunks(6 * MiB))


async def test_a_snapshot_in_parts_to_a_bucket_without_object_lock_fails_and_is_not_left_there(s3_server):
    bucket = s3_server.create_bucket(f"plain-{uuid.uuid4().hex[:12]}")
    store = locked_store(s3_server, bucket, days=1, part_size=5 * MiB)
    with pytest.raises(
        StoreError,
        match=r"the bucket has no object lock: create it with object lock enabled \(spec.backup.immutable\)"
        r".*the unlocked upload was deleted",
    ):
        await store.put_stream("default/demo/a.db", chunks(6 * MiB))
    assert "Contents" not in s3_server.boto3_client().list_objects_v2(Bucket=bucket)


async def test_a_locked_put_to_a_bucket_without_object_lock_fails_saying_so(s3_server):
    bucket = s3_server.create_bucket(f"plain-{uuid.uuid4().hex[:12]}")
    with pytest.raises(
        StoreError, match=r"the bucket has no object lock: create it with object lock enabled"
    ):
        await locked_store(s3_server, bucket, days=1).put_bytes("a.db", b"x")
    # Never stored unlocked.
    assert "Contents" not in s3_server.boto3_client().list_objects_v2(Bucket=bucket)


async def test_an_unlocked_s3_store_puts_no_lock(s3_server):
    bucket = s3_server.create_bucket(f"lock-{uuid.uuid4().hex[:12]}", object_lock=True)
    creds = S3Credentials(s3_server.access_key_id, s3_server.secret_access_key)
    store = open_store(StoreSpec(s3=S3Store(bucket=bucket, endpoint=s3_server.endpoint)), credentials=creds)
    stored = await store.put_bytes("a.db", b"x")
    assert stored.retain_until is None
    assert "ObjectLockMode" not in s3_server.boto3_client().head_object(Bucket=bucket, Key="a.db")


def test_only_s3_stores_open_locked(tmp_path):
    with pytest.raises(ValueError, match="cannot lock"):
        open_store(StoreSpec(local=LocalStore(str(tmp_path))), credentials=None, lock_days=1)


# --- the second site -----------------------------------------------------------------------------


async def backup_in(store: ObjectStore, key: str, size: int) -> str:
    """A backup as the job leaves it: the snapshot, then metadata recording its sha256."""
    stored = await store.put_stream(key, chunks(size))
    await store.put_bytes(f"{key}.json", json.dumps({"key": key, "sha256": stored.sha256}).encode())
    return stored.sha256


@pytest.mark.parametrize(("first", "second"), [("s3", "azure"), ("local", "s3"), ("azure", "gcs")])
async def test_backups_are_copied_to_a_store_of_another_kind_and_verified_there_by_hash(
    store_of, first, second
):
    source, target = store_of(first), store_of(second)
    older = await backup_in(source, "default/demo/20260101T000000Z-rev5.db", 9 * MiB)  # multipart
    newer = await backup_in(source, "default/demo/20260102T000000Z-rev9.db", 1000)
    await source.put_bytes("default/demo/20260103T000000Z-rev12.db", b"in flight: no metadata yet")
    await source.put_bytes("default/other/20260101T000000Z-rev5.db", b"another cluster's")

    copied = await sync_copies(source, target, DEMO)

    assert [(c.key, c.sha256) for c in copied] == [
        ("default/demo/20260101T000000Z-rev5.db", older),
        ("default/demo/20260102T000000Z-rev9.db", newer),
    ]
    for key, sha in [(c.key, c.sha256) for c in copied]:
        assert (await drain(target.get_stream(key)))[1] == sha
        assert json.loads(await target.get_bytes(f"{key}.json"))["sha256"] == sha
    keys = {o.key for o in await target.list("")}
    assert "default/demo/20260103T000000Z-rev12.db" not in keys and not any(
        k.startswith("default/other") for k in keys
    )
    # A second pass has nothing left to copy.
    assert await sync_copies(source, target, DEMO) == []


async def test_a_backup_whose_bytes_do_not_match_its_metadata_is_not_taken_for_a_copy(store_of):
    source, target = store_of("local"), store_of("s3")
    key = "default/demo/20260101T000000Z-rev5.db"
    await backup_in(source, key, 1000)
    await source.put_bytes(key, b"damaged after the backup was verified")  # the first site's disk rots
    with pytest.raises(CopyFailed, match="hashing to"):
        await sync_copies(source, target, DEMO)
    # Without its metadata the copy is incomplete: retention and restores ignore it, the next pass retries it.
    assert f"{key}.json" not in {o.key for o in await target.list("")}


async def test_a_second_store_whose_bucket_is_missing_fails_the_copy_naming_it(store_of, s3_server):
    source = store_of("local")
    await backup_in(source, "default/demo/20260101T000000Z-rev5.db", 1000)
    creds = S3Credentials(s3_server.access_key_id, s3_server.secret_access_key)
    target = open_store(
        StoreSpec(s3=S3Store(bucket="no-such-dr-bucket", endpoint=s3_server.endpoint)), credentials=creds
    )
    with pytest.raises(StoreError, match=r"no-such-dr-bucket.*bucket does not exist"):
        await sync_copies(source, target, DEMO)

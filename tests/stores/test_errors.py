"""What each store says when it cannot: missing bucket, wrong credentials, no endpoint, full disk."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from actors.errors import StoreAccessDenied, StoreFull, StoreNotFound, StoreUnavailable
from actors.model import AzureStore, GcsStore, LocalStore, S3Store, StoreSpec
from actors.store_port import AzureCredentials, ObjectStore, S3Credentials
from supervisor.stores import StoreOptions, open_store
from tests.harness.components import missing
from tests.harness.objstore import AzuriteServer, GcsServer, S3Server, free_port
from tests.stores.data import MiB, chunks, drain

# An unreachable endpoint must fail fast: one retry, second-long timeouts.
FAST = StoreOptions(connect_timeout=1.0, request_timeout=2.0, retries=1, retry_timeout=3.0)


def s3_store(server: S3Server, bucket: str, *, secret: str | None = None, endpoint: str = "") -> ObjectStore:
    creds = S3Credentials(server.access_key_id, secret or server.secret_access_key)
    spec = StoreSpec(s3=S3Store(bucket=bucket, endpoint=endpoint or server.endpoint))
    return open_store(spec, credentials=creds, options=FAST)


def gcs_store(endpoint: str, bucket: str) -> ObjectStore:
    return open_store(
        StoreSpec(gcs=GcsStore(bucket=bucket, endpoint=endpoint)), credentials=None, options=FAST
    )


async def every_operation_fails(store: ObjectStore, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        await store.put_stream("a/big", chunks(10 * MiB))
    with pytest.raises(error, match=match):
        await store.put_bytes("a/small", b"x")
    with pytest.raises(error, match=match):
        await store.get_bytes("a/small")
    with pytest.raises(error, match=match):
        await drain(store.get_stream("a/small"))
    with pytest.raises(error, match=match):
        await store.list("a/")


async def test_s3_bucket_that_does_not_exist(s3_server: S3Server) -> None:
    store = s3_store(s3_server, "no-such-bucket")
    await every_operation_fails(
        store, StoreNotFound, r"s3 bucket 'no-such-bucket'.*the bucket does not exist"
    )
    with pytest.raises(StoreNotFound, match="the bucket does not exist"):
        await store.delete("a/small")  # not "already deleted"


async def test_gcs_bucket_that_does_not_exist(gcs_server: GcsServer) -> None:
    store = gcs_store(gcs_server.endpoint, "no-such-bucket")
    operations = [
        lambda: store.put_bytes("a/small", b"x"),
        lambda: store.put_stream("a/big", chunks(10 * MiB)),
        lambda: store.get_bytes("a/small"),
        lambda: drain(store.get_stream("a/small")),
        lambda: store.delete("a/small"),  # not "already deleted"
    ]
    for operation in operations:
        with pytest.raises(StoreNotFound, match=r"gcs bucket 'no-such-bucket'.*the bucket does not exist"):
            await operation()


async def test_s3_wrong_credentials_are_refused(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket("creds-check")
    await every_operation_fails(
        s3_store(s3_server, bucket, secret="not-the-secret"), StoreAccessDenied, "refused the credentials"
    )
    unknown_key = open_store(
        StoreSpec(s3=S3Store(bucket=bucket, endpoint=s3_server.endpoint)),
        credentials=S3Credentials("AKIAUNKNOWN", "whatever"),
    )
    with pytest.raises(StoreAccessDenied, match="InvalidAccessKeyId"):
        await unknown_key.put_bytes("k", b"x")


def azure_store(server: AzuriteServer, container: str, *, key: str | None = None) -> ObjectStore:
    credentials = AzureCredentials(server.account_name, key or server.account_key)
    spec = StoreSpec(azure=AzureStore(container=container, endpoint=server.endpoint))
    return open_store(spec, credentials=credentials)


async def test_azure_container_that_does_not_exist(azurite_server: AzuriteServer) -> None:
    await every_operation_fails(
        azure_store(azurite_server, "no-such-container"),
        StoreNotFound,
        r"azure container 'no-such-container'.*the bucket does not exist",
    )


async def test_azure_wrong_key_is_refused(azurite_server: AzuriteServer) -> None:
    container = azurite_server.create_container("creds-check")
    wrong = "d3Jvbmcga2V5IGZvciB0aGUgZGV2ZWxvcG1lbnQgYWNjb3VudCwgbm90IGl0cyBvd24gb25lIGF0IGFsbA=="
    await every_operation_fails(
        azure_store(azurite_server, container, key=wrong), StoreAccessDenied, "refused"
    )


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A port that accepts TCP connections (the kernel's backlog) and never answers a request."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("kind", ["s3", "gcs"])
@pytest.mark.parametrize("endpoint", ["refused", "silent"])
async def test_an_unreachable_endpoint_fails_fast(
    kind: str, endpoint: str, silent_endpoint: str, s3_server: S3Server
) -> None:
    url = silent_endpoint if endpoint == "silent" else f"http://127.0.0.1:{free_port()}"
    store = s3_store(s3_server, "any-bucket", endpoint=url) if kind == "s3" else gcs_store(url, "any-bucket")
    with trio.fail_after(30):  # the bound: FAST's timeouts and one retry, well inside this
        start = trio.current_time()
        with pytest.raises(StoreUnavailable, match="did not answer"):
            await store.put_bytes("k", b"x")
        with pytest.raises(StoreUnavailable, match="did not answer"):
            await store.get_bytes("k")
        with pytest.raises(StoreUnavailable, match="did not answer"):
            await store.put_stream("big", chunks(10 * MiB))
    print(f"{kind} {endpoint}: three failures in {trio.current_time() - start:.1f} s")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs under tmp_path (needs root), unmounted afterwards."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if os.geteuid() != 0:
        missing("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        missing(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


async def test_a_full_local_disk_is_store_full_and_leaves_nothing(small_disk: Path) -> None:
    store = open_store(StoreSpec(local=LocalStore(str(small_disk / "backups"))), credentials=None)
    with pytest.raises(StoreFull, match=rf"local directory {small_disk}/backups: put 'a/big.db'.*no space"):
        await store.put_stream("a/big.db", chunks(8 * MiB))
    assert await store.list("") == []
    assert [p.name for p in (small_disk / "backups" / "a").iterdir()] == []  # no partial file
    await store.put_bytes("a/small", b"fits")  # the space came back


async def test_local_missing_key_and_escaping_symlink(tmp_path: Path) -> None:
    root = tmp_path / "backups"
    store = open_store(StoreSpec(local=LocalStore(str(root))), credentials=None)
    with pytest.raises(StoreNotFound, match=f"local directory {root}: get 'nope'"):
        await store.get_bytes("nope")
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (root / "link").symlink_to(tmp_path / "outside")
    with pytest.raises(StoreAccessDenied, match="outside the store's directory"):
        await store.put_bytes("link/x", b"x")
    assert list((tmp_path / "outside").iterdir()) == []

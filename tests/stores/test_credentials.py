"""Where a store's credentials come from: locally a file next to the manifest or the environment;
on Kubernetes the Secret the store names (against a real kube-apiserver)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.backup.copies import sync_copies
from actors.errors import StoreAccessDenied
from actors.model import AzureStore, ClusterRef, GcsStore, LocalStore, S3Store, StoreSpec
from actors.store_port import AzureCredentials, GcsCredentials, S3Credentials
from supervisor.aio import open_asyncio_loop
from supervisor.kube.backups import secret_stores
from supervisor.kube.client import open_kube_client
from supervisor.kube.store_credentials import secret_credentials
from supervisor.stores import local_credentials, open_store
from tests.harness.kube import KubeAPIServer, open_kube_apiserver
from tests.harness.objstore import AzuriteServer, S3Server

ENV = {"AWS_ACCESS_KEY_ID": "env-id", "AWS_SECRET_ACCESS_KEY": "env-secret"}


def s3(secret: str | None = "s3-creds", endpoint: str | None = None, bucket: str = "b") -> StoreSpec:
    return StoreSpec(s3=S3Store(bucket=bucket, endpoint=endpoint, credentials_secret=secret))


def gcs(secret: str | None = "gcs-creds") -> StoreSpec:
    return StoreSpec(gcs=GcsStore(bucket="b", credentials_secret=secret))


def azure(secret: str | None = "az-creds", endpoint: str | None = None, container: str = "ccc") -> StoreSpec:
    return StoreSpec(azure=AzureStore(container=container, endpoint=endpoint, credentials_secret=secret))


async def test_azure_file_credentials_work_against_azurite_and_a_stale_key_is_refused(
    tmp_path: Path, azurite_server: AzuriteServer
) -> None:
    container = azurite_server.create_container("file-creds")
    spec = azure(endpoint=azurite_server.endpoint, container=container)
    lines = f"AZURE_STORAGE_ACCOUNT_NAME={azurite_server.account_name}\nAZURE_STORAGE_ACCOUNT_KEY="
    (tmp_path / "az-creds").write_text(lines + azurite_server.account_key + "\n")
    store = open_store(spec, credentials=local_credentials(spec, tmp_path, {}))
    assert (await store.put_bytes("k", b"v")).size == 1
    (tmp_path / "az-creds").write_text(
        lines + "c3RhbGUga2V5IG9mIGFub3RoZXIgYWNjb3VudCBhbmQgbm90IHRoaXMgb25l\n"
    )
    stale = open_store(spec, credentials=local_credentials(spec, tmp_path, {}))
    with pytest.raises(StoreAccessDenied):
        await stale.get_bytes("k")
    with pytest.raises(StoreAccessDenied, match="AZURE_STORAGE_ACCOUNT_KEY"):
        local_credentials(azure(secret="nowhere"), tmp_path, {})


def test_a_file_named_like_the_secret_wins_over_the_environment(tmp_path: Path) -> None:
    (tmp_path / "s3-creds").write_text(
        "# for backups\nexport AWS_ACCESS_KEY_ID=file-id\nAWS_SECRET_ACCESS_KEY='s'\n"
    )
    assert local_credentials(s3(), tmp_path, ENV) == S3Credentials("file-id", "s")
    assert local_credentials(s3(secret="other"), tmp_path, ENV) == S3Credentials("env-id", "env-secret")
    assert local_credentials(s3(secret=None), tmp_path, {}) is None  # the client's own lookup
    assert local_credentials(StoreSpec(local=LocalStore("/x")), tmp_path, ENV) is None


def test_a_named_secret_found_nowhere_or_incomplete_is_access_denied(tmp_path: Path) -> None:
    with pytest.raises(StoreAccessDenied, match=f"credentialsSecret 's3-creds': no file {tmp_path}/s3-creds"):
        local_credentials(s3(), tmp_path, {})
    (tmp_path / "s3-creds").write_text("AWS_ACCESS_KEY_ID=id\n")
    with pytest.raises(StoreAccessDenied, match="s3-creds: AWS_SECRET_ACCESS_KEY missing"):
        local_credentials(s3(), tmp_path, ENV)


def test_gcs_key_from_a_json_file_or_google_application_credentials(tmp_path: Path) -> None:
    (tmp_path / "gcs-creds.json").write_text('{"type": "service_account"}')
    assert local_credentials(gcs(), tmp_path, {}) == GcsCredentials('{"type": "service_account"}')
    (tmp_path / "adc.json").write_text("{}")
    environ = {"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "adc.json")}
    assert local_credentials(gcs(secret=None), tmp_path, environ) == GcsCredentials("{}")
    with pytest.raises(StoreAccessDenied, match=r"gcs-other\.json"):
        local_credentials(gcs(secret="gcs-other"), tmp_path, {})


async def test_file_credentials_work_against_a_server_that_checks_them(
    tmp_path: Path, s3_server: S3Server
) -> None:
    bucket = s3_server.create_bucket("file-creds")
    spec = s3(endpoint=s3_server.endpoint, bucket=bucket)
    (tmp_path / "s3-creds").write_text(
        f"AWS_ACCESS_KEY_ID={s3_server.access_key_id}\nAWS_SECRET_ACCESS_KEY={s3_server.secret_access_key}\n"
    )
    store = open_store(spec, credentials=local_credentials(spec, tmp_path, {}))
    assert (await store.put_bytes("k", b"v")).size == 1
    (tmp_path / "s3-creds").write_text(
        f"AWS_ACCESS_KEY_ID={s3_server.access_key_id}\nAWS_SECRET_ACCESS_KEY=old\n"
    )
    stale = open_store(spec, credentials=local_credentials(spec, tmp_path, {}))
    with pytest.raises(StoreAccessDenied):
        await stale.get_bytes("k")


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPIServer]:
    with open_kube_apiserver(tmp_path_factory.mktemp("kube-apiserver")) as server:
        yield server


async def test_kubernetes_reads_the_named_secret_in_the_cluster_namespace(kube: KubeAPIServer) -> None:
    ns = kube.create_namespace("store-creds")
    secrets = {
        "s3-creds": {"AWS_ACCESS_KEY_ID": "kid", "AWS_SECRET_ACCESS_KEY": "ksecret"},
        "gcs-creds": {"service-account.json": json.dumps({"type": "service_account"})},
        "half": {"AWS_ACCESS_KEY_ID": "kid"},
        "az-creds": {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_ACCOUNT_KEY": "akey"},
    }
    for name, data in secrets.items():
        literals = [f"--from-literal={k}={v}" for k, v in data.items()]
        kube.kubectl("-n", ns, "create", "secret", "generic", name, *literals)
    async with open_asyncio_loop(), open_kube_client(str(kube.kubeconfig)) as client:
        assert await secret_credentials(client, ns, s3()) == S3Credentials("kid", "ksecret")
        assert await secret_credentials(client, ns, gcs()) == GcsCredentials('{"type": "service_account"}')
        assert await secret_credentials(client, ns, s3(secret=None)) is None
        assert await secret_credentials(client, ns, azure()) == AzureCredentials("acct", "akey")
        with pytest.raises(
            StoreAccessDenied, match=f"credentialsSecret {ns}/half: AWS_SECRET_ACCESS_KEY missing"
        ):
            await secret_credentials(client, ns, s3(secret="half"))
        with pytest.raises(StoreAccessDenied, match=f"credentialsSecret {ns}/absent: 404"):
            await secret_credentials(client, ns, s3(secret="absent"))


async def test_on_kubernetes_a_second_store_opens_on_its_own_secret_and_locks_what_it_is_given(
    kube: KubeAPIServer, s3_server: S3Server
) -> None:
    """The operator's store opener (secret_stores): the second site (copyTo) with a Secret of its
    own, locked (immutable) through the same opener the backup children use."""
    ns = kube.create_namespace("second-site")
    kube.kubectl(
        "-n", ns, "create", "secret", "generic", "dr-creds",
        f"--from-literal=AWS_ACCESS_KEY_ID={s3_server.access_key_id}",
        f"--from-literal=AWS_SECRET_ACCESS_KEY={s3_server.secret_access_key}",
    )  # fmt: skip
    first = s3_server.create_bucket("first-site")
    second = s3_server.create_bucket("second-site", object_lock=True)
    s3_server.boto3_client().put_object(Bucket=first, Key=f"{ns}/demo/a.db", Body=b"snapshot")
    meta = json.dumps({"sha256": hashlib.sha256(b"snapshot").hexdigest()}).encode()
    s3_server.boto3_client().put_object(Bucket=first, Key=f"{ns}/demo/a.db.json", Body=meta)
    async with open_asyncio_loop(), open_kube_client(str(kube.kubeconfig)) as client:
        opener = secret_stores(client)
        cluster = ClusterRef(ns, "demo")
        # The first site as written (only the second store is opened through the operator here).
        source = open_store(
            s3(secret=None, endpoint=s3_server.endpoint, bucket=first),
            credentials=S3Credentials(s3_server.access_key_id, s3_server.secret_access_key),
        )
        target = opener(
            cluster, s3(secret="dr-creds", endpoint=s3_server.endpoint, bucket=second), lock_days=2
        )
        copied = await sync_copies(source, target, cluster)
        await target.aclose()
    assert [c.key for c in copied] == [f"{ns}/demo/a.db"]
    head = s3_server.boto3_client().head_object(Bucket=second, Key=f"{ns}/demo/a.db")
    assert head["ObjectLockMode"] == "COMPLIANCE"
    written = json.loads(
        s3_server.boto3_client().get_object(Bucket=second, Key=f"{ns}/demo/a.db.json")["Body"].read()
    )
    assert written["retainUntil"] == head["ObjectLockRetainUntilDate"].timestamp()

"""Real object-store servers for the store and backup tests, as processes on loopback.

- S3: moto's server mode (`moto_server`, installed by the test extra), with IAM authentication
  switched on once a user and its access key exist, so wrong credentials are refused as by S3.
- GCS: fake-gcs-server, built from its Go module by tests/stores/build-fake-gcs.sh (`make
  fake-gcs`, part of `make setup`). It does not check credentials.

A server that cannot be found is a MissingComponent (a skip, or a failure under CI=true).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from tests.harness.components import MissingComponent, go_install_cached
from tests.harness.poll import until

FAKE_GCS_BUILD = Path(__file__).resolve().parents[1] / "stores" / "build-fake-gcs.sh"
REGION = "us-east-1"


@attrs.frozen
class S3Server:
    endpoint: str
    access_key_id: str
    secret_access_key: str

    def boto3_client(self, service: str = "s3"):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name=REGION,
        )

    def create_bucket(self, name: str, *, object_lock: bool = False) -> str:
        """`object_lock`: the bucket can lock objects (S3 allows it only at creation; it turns
        versioning on)."""
        self.boto3_client().create_bucket(Bucket=name, ObjectLockEnabledForBucket=object_lock)
        return name


@attrs.frozen
class GcsServer:
    endpoint: str

    def create_bucket(self, name: str) -> str:
        body = json.dumps({"name": name}).encode()
        request = urllib.request.Request(
            f"{self.endpoint}/storage/v1/b",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10).read()
        return name


# Azurite's well-known development account (documented by Microsoft; it only ever opens Azurite).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE_INSTALL = Path(__file__).resolve().parents[1] / "stores" / "install-azurite.sh"


@attrs.frozen
class AzuriteServer:
    endpoint: str  # the blob service with the account: http://127.0.0.1:<port>/devstoreaccount1
    account_name: str = AZURITE_ACCOUNT
    account_key: str = AZURITE_KEY

    def create_container(self, name: str) -> str:
        from azure.storage.blob import BlobServiceClient  # the test extra: only tests make containers

        credential = {"account_name": self.account_name, "account_key": self.account_key}
        BlobServiceClient(account_url=self.endpoint, credential=credential).create_container(name)
        return name


def azurite_binary() -> Path:
    """The azurite-blob install-azurite.sh made for its pinned version; never installed from a test."""
    version = re.search(r"^version=(\S+)$", AZURITE_INSTALL.read_text(), re.M)
    assert version, f"no version= line in {AZURITE_INSTALL}"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    binary = (
        cache / "etcd-supervisor" / "azurite" / version.group(1) / "node_modules" / ".bin" / "azurite-blob"
    )
    if not binary.exists():
        raise MissingComponent(f"azurite not installed ({binary}): run `make azurite`")
    return binary


@contextmanager
def open_azurite(workdir: Path) -> Iterator[AzuriteServer]:
    """Azurite's blob service on a free loopback port, blobs on disk under `workdir`; requests
    must be signed with the development account's key (Azurite checks shared-key signatures)."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
    argv = [
        str(azurite_binary()), "--blobHost", "127.0.0.1", "--blobPort", str(port),
        "--location", str(workdir / "data"), "--silent", "--skipApiVersionCheck",
    ]  # fmt: skip
    with _process(argv, workdir / "azurite.log", f"http://127.0.0.1:{port}/"):
        yield AzuriteServer(endpoint)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def moto_server_binary() -> Path:
    found = Path(sys.executable).parent / "moto_server"
    if found.exists():
        return found
    which = shutil.which("moto_server")
    if which is None:
        raise MissingComponent("moto_server not installed (pip install -e '.[test]')")
    return Path(which)


def fake_gcs_binary() -> Path:
    """The binary build-fake-gcs.sh made for its pinned version; never built from a test."""
    return go_install_cached(FAKE_GCS_BUILD, "fake-gcs-server", "fake-gcs")


@contextmanager
def _process(argv: list[str], log: Path, ready_url: str) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_ready(proc, ready_url, log)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:

    def answers() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=1).read()
        except urllib.error.HTTPError:
            return True  # it answers
        except OSError:
            return False
        return True

    try:
        until(answers, within=30, what=f"{url} answering")
    except TimeoutError:
        raise RuntimeError(f"{proc.args} did not answer {url} in 30 s: {log.read_text()[-2000:]}") from None


@contextmanager
def open_moto_server(workdir: Path, host: str = "127.0.0.1") -> Iterator[S3Server]:
    """moto on a free port of `host` (loopback; pods need an address they can reach), refusing
    any request not signed by the key it yields."""
    port = free_port(host)
    endpoint = f"http://{host}:{port}"
    argv = [str(moto_server_binary()), "-H", host, "-p", str(port)]
    with _process(argv, workdir / "moto.log", f"{endpoint}/moto-api/data.json"):
        yield _with_auth(endpoint)


def _with_auth(endpoint: str) -> S3Server:
    # Authentication is off until moto-api/reset-auth says after how many more requests it
    # starts: the user and its key are made first, then it is on (0) for every later request.
    bootstrap = S3Server(endpoint, "bootstrap", "bootstrap")
    iam = bootstrap.boto3_client("iam")
    iam.create_user(UserName="backups")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy(UserName="backups", PolicyName="all", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="backups")["AccessKey"]
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"}
    )
    urllib.request.urlopen(request, timeout=10).read()
    return S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"])


@contextmanager
def open_fake_gcs_server(workdir: Path) -> Iterator[GcsServer]:
    """fake-gcs-server on a free loopback port, objects on disk under `workdir`."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    argv = [
        str(fake_gcs_binary()),
        "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
        "-backend", "filesystem", "-filesystem-root", str(workdir / "data"),
        "-public-host", f"127.0.0.1:{port}", "-external-url", endpoint, "-log-level", "warn",
    ]  # fmt: skip
    with _process(argv, workdir / "fake-gcs.log", f"{endpoint}/storage/v1/b"):
        yield GcsServer(endpoint)

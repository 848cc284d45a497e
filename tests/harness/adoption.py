"""What adoption tests (spec.adopt) share: the old cluster's data read and written, and its TLS
material as the Secrets spec.adopt names."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path

from actors.model import AdoptSpec, ClusterStatus, Role
from supervisor.etcd.client import open_etcd_client
from supervisor.etcd.tls import TlsFiles
from tests.harness import etcd as harness_etcd
from tests.harness.etcd import EtcdCluster

PREFIX = b"data/"
CLIENT_SECRET, PEER_CA_SECRET = "old-client", "old-peer-ca"


async def contents(endpoints: list[str], tls: TlsFiles | None) -> dict[bytes, tuple[bytes, int]]:
    """Every key under PREFIX with its value and the revision it was last written at."""
    async with open_etcd_client(endpoints, tls=tls, call_timeout=5.0) as etcd:
        return {kv.key: (kv.value, kv.mod_revision) for kv in await etcd.range(PREFIX, b"data0")}


async def write(endpoints: list[str], tls: TlsFiles | None, count: int) -> None:
    async with open_etcd_client(endpoints, tls=tls, call_timeout=5.0) as etcd:
        for n in range(count):
            await etcd.put(PREFIX + f"{n:05d}".encode(), f"value {n}".encode())


async def member_names(endpoints: list[str], tls: TlsFiles | None) -> list[str]:
    async with open_etcd_client(endpoints, tls=tls, call_timeout=5.0) as etcd:
        return sorted(m.name for m in await etcd.member_list())


def old_client_tls(old: EtcdCluster) -> TlsFiles:
    """The old cluster's client identity (what its applications use)."""
    assert old.tls is not None
    return TlsFiles(old.tls.ca, old.tls.client_cert, old.tls.client_key)


def old_secrets(old: EtcdCluster) -> dict[str, Mapping[str, bytes]]:
    """Secret name -> its keys: the old client identity with its CA, and the old peer CA."""
    assert old.tls is not None
    return adoption_secrets(old.tls)


def adoption_secrets(files: harness_etcd.TlsFiles) -> dict[str, Mapping[str, bytes]]:
    """old_secrets from an old cluster's TLS files (harness_etcd.generate_tls), wherever it runs."""
    return {
        CLIENT_SECRET: {
            "ca.crt": files.ca.read_bytes(),
            "tls.crt": files.client_cert.read_bytes(),
            "tls.key": files.client_key.read_bytes(),
        },
        PEER_CA_SECRET: {
            "ca.crt": files.ca.read_bytes(),
            "ca.key": files.ca.with_name("ca-key.pem").read_bytes(),
        },
    }


def secret_manifest(name: str, data: Mapping[str, bytes]) -> dict[str, object]:
    """A Kubernetes Secret holding `data`, as the operator reads spec.adopt's Secrets."""
    encoded = {key: base64.b64encode(value).decode() for key, value in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": encoded}


def write_secret_dirs(secrets: dict[str, Mapping[str, bytes]], root: Path) -> None:
    """Secrets as local mode reads them: a directory of files each."""
    for name, keys in secrets.items():
        (root / name).mkdir(parents=True)
        for key, value in keys.items():
            (root / name / key).write_bytes(value)


def adopt_spec(
    old: EtcdCluster, secrets: Path, *, remove_old: bool = True
) -> tuple[TlsFiles | None, AdoptSpec]:
    """spec.adopt naming the old cluster, and its clients' TLS files (None: plain). With TLS its
    Secrets are written as directories under `secrets`."""
    endpoints = tuple(old.endpoints)
    if old.tls is None:
        return None, AdoptSpec(endpoints, remove_old=remove_old)
    write_secret_dirs(old_secrets(old), secrets)
    return old_client_tls(old), AdoptSpec(endpoints, CLIENT_SECRET, PEER_CA_SECRET, remove_old=remove_old)


def new_voters(status: ClusterStatus, prefix: str = "demo-") -> list[str]:
    """Client URLs of the cluster's own members that vote and answer."""
    voting = (Role.LEADER, Role.FOLLOWER)
    return [
        m.client_url for m in status.members if m.name.startswith(prefix) and m.role in voting and m.healthy
    ]

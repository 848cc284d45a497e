"""Certificates the user brings (secretRef) on a real kube-apiserver, members run by the
stand-in kubelet: the cluster forms on them, the user's renewal is rolled out one member at a
time, and a broken Secret is reported naming the key while the members keep what works."""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path

import pytest

from actors.model import ClusterRef
from supervisor import pki
from supervisor.etcd import EtcdClient, TlsFiles
from supervisor.kube import manifests as m
from supervisor.kube.tls import member_dns_names
from tests.harness.kube import KubeAPIServer
from tests.harness.poll import eventually
from tests.kube.test_operator import condition, create_cluster, healthy, operator_with_kubelet, wait_for
from tests.unit.test_byo_tls import NOW, user_secret

pytestmark = pytest.mark.slow


def secret_body(name: str, data: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data}


def leaves_for(ref: ClusterRef, ca: pki.KeyPair) -> dict[str, str]:
    """The user's Secret for this cluster: leaves whose names cover its members and Services."""
    names = member_dns_names(ref)
    life = dt.timedelta(days=365)  # beyond renewBefore (30 days by default)
    server = pki.issue(
        ca,
        "server",
        now=NOW,
        lifetime=life,
        dns=names,
        ips=["127.0.0.1"],
        server_auth=True,
        client_auth=False,
    )
    peer = pki.issue(ca, "peer", now=NOW, lifetime=life, dns=names, server_auth=True, client_auth=True)
    client = pki.issue(ca, "root", now=NOW, lifetime=life, server_auth=False, client_auth=True)
    overrides = {"server.crt": server.cert_pem(), "server.key": server.key_pem()}
    overrides |= {"client.crt": client.cert_pem(), "client.key": client.key_pem()}
    overrides |= {"peer.crt": peer.cert_pem(), "peer.key": peer.key_pem()}
    return user_secret(ca, **overrides)


async def test_a_users_secret_serves_its_renewal_rolls_out_and_a_broken_one_is_reported(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    ref = ClusterRef(ns, "demo")
    ca = pki.new_ca("user ca", now=NOW, lifetime=dt.timedelta(days=3650))
    secrets = m.core_path(ns, "secrets")
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
        await admin.create(secrets, secret_body("my-tls", leaves_for(ref, ca)))
        path = await create_cluster(
            admin, "demo", ns, {"size": 3, "security": {"tls": {"secretRef": {"name": "my-tls"}}}}
        )
        obj = await wait_for(admin, path, healthy(3), timeout=90)
        obj = await wait_for(
            admin, path, lambda o: condition(o, "CertificatesValid").get("status") == "True", timeout=30
        )
        assert "from Secret my-tls" in condition(obj, "CertificatesValid")["message"]
        # The members serve the user's server certificate; our client is the user's client pair.
        files = tmp_path / "tls" / ns / "demo"
        tls = TlsFiles(files / m.TLS_CA_CERT, files / m.TLS_CLIENT_CERT, files / m.TLS_CLIENT_KEY)
        urls = [mem["clientURL"] for mem in obj["status"]["members"]]
        etcd = EtcdClient(urls, tls=tls)
        try:
            await etcd.put(b"kept", b"through the user's renewal")
        finally:
            await etcd.aclose()
        assert sorted(kubelet.runs) == ["demo-0", "demo-1", "demo-2"]

        # The user renews their leaves (same CA): the copy follows, each member restarts once.
        renewed = leaves_for(ref, ca)
        live = await admin.get(f"{secrets}/my-tls")
        await admin.replace(f"{secrets}/my-tls", {**live, "data": renewed})
        await eventually(
            lambda: admin.get(f"{secrets}/demo-tls"),
            lambda copy: copy["data"]["tls.crt"] == renewed["server.crt"],
            within=30,
            what="the copy of the renewed Secret",
        )
        await eventually(
            lambda: len(kubelet.runs), lambda runs: runs == 6, within=90, what="each member restarted once"
        )
        obj = await wait_for(admin, path, healthy(3), timeout=60)
        etcd = EtcdClient([mem["clientURL"] for mem in obj["status"]["members"]], tls=tls)
        try:
            assert await etcd.get(b"kept") == b"through the user's renewal"
        finally:
            await etcd.aclose()

        # Broken by the user: said, naming the key; the members keep the last good copy.
        live = await admin.get(f"{secrets}/my-tls")
        broken = {k: v for k, v in renewed.items() if k != "peer.key"}
        await admin.replace(f"{secrets}/my-tls", {**live, "data": broken})
        obj = await wait_for(
            admin,
            path,
            lambda o: condition(o, "CertificatesValid").get("reason") == "SecretInvalid",
            timeout=30,
        )
        assert "missing peer.key" in condition(obj, "CertificatesValid")["message"]
        copy = await admin.get(f"{secrets}/demo-tls")
        assert base64.b64decode(copy["data"]["peer.key"]) == base64.b64decode(renewed["peer.key"])
        await wait_for(admin, path, healthy(3), timeout=30)
        assert len(kubelet.runs) == 6

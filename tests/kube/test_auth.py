"""spec.security.auth on a real kube-apiserver, members run by the stand-in kubelet: the operator
turns etcd's auth on with the spec's users and roles, writes a user's client certificate into
the Secret the spec names (owned by the EtcdCluster), and that certificate reaches its prefix
and nothing else; a user removed from the spec loses access."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from supervisor.etcd import (
    AuthenticationFailed,
    NotAuthenticated,
    PermissionDenied,
    TlsFiles,
    open_etcd_client,
)
from supervisor.kube import manifests as m
from tests.harness.kube import KubeAPIServer
from tests.harness.poll import eventually
from tests.kube.test_operator import create_cluster, healthy, operator_with_kubelet, wait_for

pytestmark = pytest.mark.slow

ROLES = [{"name": "app-rw", "permissions": [{"type": "readwrite", "key": "/app/", "prefix": True}]}]
APP = {"name": "app", "roles": ["app-rw"], "clientCertSecret": "app-etcd-client"}


def reasons(events: dict, reason: str) -> list[str]:
    return [e.get("message", "") for e in events.get("items", []) if e.get("reason") == reason]


async def test_users_and_roles_with_auth_on_and_a_users_certificate_in_its_secret(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, _):
        auth = {"enabled": True, "users": [APP], "roles": ROLES}
        path = await create_cluster(admin, "demo", ns, {"size": 3, "security": {"auth": auth}})
        obj = await wait_for(admin, path, healthy(3), timeout=90)
        secret_path = m.core_path(ns, "secrets", "app-etcd-client")
        secret = await wait_for(admin, secret_path, lambda s: "tls.crt" in (s.get("data") or {}), timeout=60)
        assert secret["type"] == "kubernetes.io/tls"
        assert secret["metadata"]["ownerReferences"][0]["name"] == "demo"
        files = tmp_path / "app"
        files.mkdir()
        for key in ("ca.crt", "tls.crt", "tls.key"):
            (files / key).write_bytes(base64.b64decode(secret["data"][key]))
        tls = TlsFiles(files / "ca.crt", files / "tls.crt", files / "tls.key")
        urls = [mem["clientURL"] for mem in obj["status"]["members"]]

        events = await admin.get(m.core_path(ns, "events"))
        assert any("enable auth" in msg for msg in reasons(events, "AuthReconciled")), events
        async with open_etcd_client(urls, tls=tls, call_timeout=5) as app:
            await app.put(b"/app/k", b"v")
            assert await app.get(b"/app/k") == b"v"
            with pytest.raises(PermissionDenied):
                await app.put(b"/elsewhere", b"no")

        await admin.merge_patch(path, {"spec": {"security": {"auth": {"users": []}}}})

        async def gone() -> bool:
            async with open_etcd_client(urls, tls=tls, call_timeout=5) as app:
                try:
                    await app.get(b"/app/k")
                except (PermissionDenied, AuthenticationFailed, NotAuthenticated):
                    return True
                return False

        await eventually(gone, lambda denied: denied, within=60, every=0.5, what="the removed user refused")

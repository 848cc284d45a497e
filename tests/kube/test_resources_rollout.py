"""A resources change on a real kube-apiserver, members run by the stand-in kubelet: each member's
pod is remade once, one at a time, with the new requests; a spec without resources remakes none."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.kube import manifests as m
from tests.harness.kube import KubeAPIServer
from tests.harness.poll import eventually
from tests.kube.test_operator import create_cluster, healthy, operator_with_kubelet, wait_for

pytestmark = pytest.mark.slow


async def test_a_resources_change_remakes_each_member_once_with_the_new_requests(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
        path = await create_cluster(admin, "demo", ns, {"size": 3, "security": {"tls": {"enabled": False}}})
        await wait_for(admin, path, healthy(3), timeout=90)
        assert sorted(kubelet.runs) == ["demo-0", "demo-1", "demo-2"]

        wanted = {"requests": {"cpu": "100m", "memory": "128Mi"}}
        await admin.merge_patch(path, {"spec": {"resources": wanted}})

        def requests_of(pods: dict) -> list[dict]:
            containers = [p["spec"]["containers"][0] for p in pods["items"]]
            return [c.get("resources", {}).get("requests", {}) for c in containers]

        await eventually(
            lambda: admin.get(m.core_path(ns, "pods")),
            lambda pods: len(pods["items"]) == 3 and all(r == wanted["requests"] for r in requests_of(pods)),
            within=120,
            what="every member pod with the new requests",
        )
        await eventually(
            lambda: len(kubelet.runs), lambda runs: runs >= 6, within=60, what="the pods started"
        )
        await wait_for(admin, path, healthy(3), timeout=60)
        assert sorted(kubelet.runs) == sorted(["demo-0", "demo-1", "demo-2"] * 2), kubelet.runs

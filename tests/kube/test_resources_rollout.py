"""A resources change on a real kube-apiserver, members run by the stand-in kubelet: each member's
pod is remade once, one at a time, with the new requests, under a client workload whose history
is linearizable; a spec without resources remakes none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from supervisor.kube import manifests as m
from tests.harness.history import KvWorkload
from tests.harness.kube import KubeAPIServer
from tests.harness.poll import eventually
from tests.kube.test_operator import create_cluster, healthy, operator_with_kubelet, wait_for

pytestmark = pytest.mark.slow


def serving_urls(obj: dict[str, Any]) -> list[str]:
    members = (obj.get("status") or {}).get("members") or []
    return [mem["clientURL"] for mem in members if mem.get("healthy") and mem.get("clientURL")]


async def rolled_out(admin: Any, ns: str, path: str, kubelet: Any, wanted: dict[str, Any]) -> None:
    """Every member pod carries the new requests, was started again, and the cluster is healthy."""

    def requests_of(pods: dict[str, Any]) -> list[dict[str, Any]]:
        containers = [p["spec"]["containers"][0] for p in pods["items"]]
        return [c.get("resources", {}).get("requests", {}) for c in containers]

    await eventually(
        lambda: admin.get(m.core_path(ns, "pods")),
        lambda pods: len(pods["items"]) == 3 and all(r == wanted["requests"] for r in requests_of(pods)),
        within=120,
        what="every member pod with the new requests",
    )
    await eventually(lambda: len(kubelet.runs), lambda runs: runs >= 6, within=60, what="the pods started")
    await wait_for(admin, path, healthy(3), timeout=60)


async def test_a_resources_change_remakes_each_member_once_with_the_new_requests(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
        path = await create_cluster(admin, "demo", ns, {"size": 3, "security": {"tls": {"enabled": False}}})
        await wait_for(admin, path, healthy(3), timeout=90)
        assert sorted(kubelet.runs) == ["demo-0", "demo-1", "demo-2"]

        obj = await admin.get(path)
        workload = KvWorkload(endpoints=serving_urls(obj))

        async def follow_members() -> None:
            # A remade member may serve on another address: the clients follow the status.
            while True:
                workload.endpoints[:] = serving_urls(await admin.get(path)) or workload.endpoints
                await trio.sleep(0.2)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow_members)
            nursery.start_soon(workload.run)
            await workload.wait_for_more(50)
            wanted = {"requests": {"cpu": "100m", "memory": "128Mi"}}
            await admin.merge_patch(path, {"spec": {"resources": wanted}})
            await rolled_out(admin, ns, path, kubelet, wanted)
            await workload.wait_for_more(50)
            nursery.cancel_scope.cancel()
        assert sorted(kubelet.runs) == sorted(["demo-0", "demo-1", "demo-2"] * 2), kubelet.runs
        verdict = await workload.check(tmp_path / "history")
        assert verdict.ok, verdict.report


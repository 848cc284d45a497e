"""etcd.io/suspend on a real kube-apiserver, members run by the stand-in kubelet: a member whose
etcd died while suspended keeps its failed pod, the status says Suspended; removing the
annotation replaces it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.kube import KubeAPIServer
from tests.kube.test_operator import condition, create_cluster, healthy, operator_with_kubelet, wait_for

pytestmark = pytest.mark.slow


async def test_a_member_lost_while_suspended_is_replaced_only_once_resumed(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
        path = await create_cluster(admin, "demo", ns, {"size": 3, "security": {"tls": {"enabled": False}}})
        await wait_for(admin, path, healthy(3), timeout=90)
        await admin.merge_patch(path, {"metadata": {"annotations": {"etcd.io/suspend": "true"}}})
        await wait_for(admin, path, lambda o: o["status"]["phase"] == "Suspended", timeout=20)

        kubelet.kill_process("demo-1")
        obj = await wait_for(
            admin, path, lambda o: "held" in condition(o, "Suspended").get("message", ""), timeout=30
        )
        assert obj["status"]["phase"] == "Suspended"
        assert kubelet.runs.count("demo-1") == 1, "restarted while suspended"

        await admin.merge_patch(path, {"metadata": {"annotations": {"etcd.io/suspend": None}}})
        await wait_for(admin, path, healthy(3), timeout=60)
        assert kubelet.runs.count("demo-1") == 2

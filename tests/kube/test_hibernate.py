"""spec.hibernate on a real kube-apiserver, members run by the stand-in kubelet: hibernating
deletes every member pod and keeps every claim (phase Hibernated, no pod made meanwhile); waking
makes the pods again on the same claims, the same members with their data."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from actors.model import ClusterRef
from supervisor.etcd.client import open_etcd_client
from supervisor.kube import manifests as m
from tests.harness.kube import KubeAPIServer
from tests.harness.poll import eventually
from tests.kube.test_operator import create_cluster, healthy, operator_with_kubelet, wait_for

pytestmark = pytest.mark.slow


async def test_hibernate_deletes_the_pods_keeps_the_claims_and_wakes_on_them(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
        path = await create_cluster(admin, "demo", ns, {"size": 3, "security": {"tls": {"enabled": False}}})
        obj = await wait_for(admin, path, healthy(3), timeout=90)
        ids = {mem["name"]: mem["id"] for mem in obj["status"]["members"]}
        async with open_etcd_client([mem["clientURL"] for mem in obj["status"]["members"]]) as etcd:
            for n in range(50):
                await etcd.put(f"k/{n:03d}".encode(), b"v")
            revision = await etcd.current_revision()

        await admin.merge_patch(path, {"spec": {"hibernate": True}})
        await wait_for(admin, path, lambda o: o["status"]["phase"] == "Hibernated", timeout=60)
        selector = {"labelSelector": m.label_selector(m.member_selector(ClusterRef(ns, "demo")))}

        async def names(collection: str) -> list[str]:
            found = await admin.list_all(m.core_path(ns, collection), query=selector)
            return sorted(o["metadata"]["name"] for o in found.get("items") or [])

        await eventually(lambda: names("pods"), lambda found: found == [], within=30, what="pods deleted")
        assert await names("persistentvolumeclaims") == sorted(m.volume_claim_name(n) for n in ids)
        runs = list(kubelet.runs)
        await trio.sleep(3)
        assert kubelet.runs == runs, "a pod was made while hibernated"
        assert await names("pods") == []

        await admin.merge_patch(path, {"spec": {"hibernate": False}})
        obj = await wait_for(admin, path, healthy(3), timeout=90)
        assert {mem["name"]: mem["id"] for mem in obj["status"]["members"]} == ids
        async with open_etcd_client([mem["clientURL"] for mem in obj["status"]["members"]]) as etcd:
            assert len(await etcd.range(b"k/", b"k0")) == 50
            assert await etcd.current_revision() == revision

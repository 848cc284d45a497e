"""spec.adopt over TLS on a real kube-apiserver, members run by the stand-in kubelet: a TLS etcd
cluster started by hand (TLS for clients and peers, one CA) is taken over live. The operator
signs the new members' certificates with the old CA from the peerCASecret Secret, reaches the
old members with them, the old members leave (removeOld), every key keeps its value and revision,
and the old clients' certificates work on the new members throughout (porcupine-checked). A
peerCASecret that cannot serve is reported and nothing is made."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from actors.model import ClusterRef, ClusterSpec
from supervisor.kube import manifests as m
from tests.harness.adoption import (
    CLIENT_SECRET,
    PEER_CA_SECRET,
    contents,
    member_names,
    old_client_tls,
    old_secrets,
    secret_manifest,
    write,
)
from tests.harness.etcd import running_cluster
from tests.harness.etcd_versions import built_or_skip
from tests.harness.history import KvWorkload, checker_or_skip
from tests.harness.kube import KubeAPIServer
from tests.kube.test_operator import create_cluster, healthy, operator_with_kubelet, wait_for

pytestmark = pytest.mark.slow

VERSION = ClusterSpec().version


def only_new(obj: dict) -> bool:
    members = (obj.get("status") or {}).get("members", [])
    return healthy(3)(obj) and all(mem["name"].startswith("demo-") for mem in members)


async def test_a_tls_cluster_is_adopted_with_its_own_ca_and_its_old_members_leave(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    checker_or_skip()
    ns = kube_namespace
    with running_cluster(built_or_skip(VERSION), tmp_path / "old", size=3, tls=True, peer_tls=True) as old:
        old_urls, tls = list(old.endpoints), old_client_tls(old)
        async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, _):
            for name, data in old_secrets(old).items():
                await admin.create(m.core_path(ns, "secrets"), secret_manifest(name, dict(data)))
            await write(old_urls, tls, 300)
            before = await contents(old_urls, tls)
            workload = KvWorkload(endpoints=list(old_urls), tls=tls)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(workload.run)
                await workload.wait_for_more(50)
                adopt = {
                    "endpoints": old_urls,
                    "clientSecret": CLIENT_SECRET,
                    "peerCASecret": PEER_CA_SECRET,
                    "removeOld": True,
                }
                path = await create_cluster(admin, "demo", ns, {"size": 3, "adopt": adopt})
                grown = await wait_for(admin, path, lambda o: len(new_voting(o)) == 3, timeout=180)
                workload.endpoints[:] = [*old_urls, *new_voting(grown)]
                done = await wait_for(admin, path, only_new, timeout=180)
                new_urls = [mem["clientURL"] for mem in done["status"]["members"]]
                workload.endpoints[:] = new_urls
                await workload.wait_for_more(50)
                nursery.cancel_scope.cancel()
            after = await contents(new_urls, tls)  # the old clients' identity, on the new members
            names = await member_names(new_urls, tls)
    assert names == ["demo-0", "demo-1", "demo-2"]
    assert after == before
    verdict = await workload.check(tmp_path / "history")
    print(f"linearizability: {verdict.operations} operations checked")
    assert verdict.ok, verdict.report


def new_voting(obj: dict) -> list[str]:
    members = (obj.get("status") or {}).get("members", [])
    return [
        mem["clientURL"]
        for mem in members
        if mem["name"].startswith("demo-")
        and mem.get("role") in ("leader", "follower")
        and mem.get("healthy")
    ]


async def test_a_peer_ca_secret_that_cannot_serve_makes_nothing(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    ref = ClusterRef(ns, "broken")
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
        await admin.create(
            m.core_path(ns, "secrets"), secret_manifest(PEER_CA_SECRET, {"ca.crt": b"not a cert"})
        )
        await admin.create(m.core_path(ns, "secrets"), secret_manifest(CLIENT_SECRET, {"ca.crt": b"x"}))
        adopt = {
            "endpoints": ["https://127.0.0.1:1"],
            "clientSecret": CLIENT_SECRET,
            "peerCASecret": PEER_CA_SECRET,
        }
        path = await create_cluster(admin, ref.name, ns, {"size": 3, "adopt": adopt})
        named = "spec.adopt.peerCASecret: ca.key is missing"  # the status says why
        obj = await wait_for(admin, path, lambda o: named in str(o.get("status") or {}), timeout=30)
        await trio.sleep(3)  # a few more looks: still nothing made
        secret = await admin.get_or_none(m.core_path(ns, "secrets", m.tls_secret_name(ref)))
        assert secret is None and kubelet.runs == [], obj.get("status")

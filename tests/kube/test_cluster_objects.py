"""A cluster's own objects follow what the operator makes, on a real kube-apiserver: a changed
manifest (what an operator upgrade brings) and a hand edit are both corrected, in the fields
the operator owns only; the TLS Secret's keys are never made again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from actors.model import ClusterRef, ClusterSpec
from supervisor.kube import cluster_objects as objects
from supervisor.kube import manifests as m
from supervisor.kube.runtime import KubeRuntime
from tests.harness.kube import KubeAPIServer
from tests.kube.clients import clients
from tests.kube.test_runtime import create_cluster, launch_for

pytestmark = pytest.mark.slow


async def test_a_changed_manifest_is_followed_by_the_live_objects(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    """The objects an older operator made stay until corrected: here the "new" manifests add a
    client Service port and count the budget by maxUnavailable (as operators before the voter
    budget did), and ensure() brings the live objects forward; today's manifests bring them
    back again."""
    ns = kube_namespace
    ref = ClusterRef(ns, "moved")
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        cluster = await create_cluster(admin, ns, "moved")
        owner = m.Owner(ref, cluster["metadata"]["uid"])
        await KubeRuntime(op).allocate_member(ref, "moved-0", ClusterSpec())
        service_path = m.core_path(ns, "services", m.client_service_name(ref))
        budget_path = m.pdb_path(ns, m.disruption_budget_name(ref))
        cluster_ip = (await admin.get(service_path))["spec"]["clusterIP"]

        def more_ports(owner: m.Owner) -> dict[str, Any]:
            svc = m.client_service(owner)
            svc["spec"]["ports"].append(
                {"name": "extra", "port": 9999, "targetPort": 9999, "protocol": "TCP"}
            )
            return svc

        def max_unavailable(owner: m.Owner) -> dict[str, Any]:
            pdb = m.disruption_budget(owner, None)
            del pdb["spec"]["minAvailable"]
            pdb["spec"]["maxUnavailable"] = 1
            return pdb

        await objects.ensure(op, attrs.evolve(objects.client_service(), build=more_ports), owner)
        await objects.ensure(op, attrs.evolve(objects.disruption_budget(), build=max_unavailable), owner)
        service, budget = await admin.get(service_path), await admin.get(budget_path)
        assert [p["port"] for p in service["spec"]["ports"]] == [m.CLIENT_PORT, m.METRICS_PORT, 9999]
        assert service["spec"]["clusterIP"] == cluster_ip  # the API server's, untouched
        assert budget["spec"]["maxUnavailable"] == 1 and "minAvailable" not in budget["spec"]

        for component in (objects.client_service(), objects.disruption_budget()):
            await objects.ensure(op, component, owner)
        service, budget = await admin.get(service_path), await admin.get(budget_path)
        assert [p["port"] for p in service["spec"]["ports"]] == [m.CLIENT_PORT, m.METRICS_PORT]
        assert budget["spec"]["minAvailable"] == "100%" and "maxUnavailable" not in budget["spec"]
        assert budget["spec"]["selector"]["matchLabels"]["etcd.io/voter"] == "true"

        # Nothing drifted: nothing is written (no update every ENSURE_EVERY for nothing).
        versions = [(await admin.get(p))["metadata"]["resourceVersion"] for p in (service_path, budget_path)]
        for component in objects.cluster_objects(ClusterSpec(), cluster_domain="cluster.local", now=_never):
            await objects.ensure(op, component, owner)
        assert versions == [
            (await admin.get(p))["metadata"]["resourceVersion"] for p in (service_path, budget_path)
        ]


async def test_hand_edits_of_the_owned_fields_are_undone_and_others_kept(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    """kubectl-style edits of the Services, the budget and the Secret are set back at the next
    member step after ENSURE_EVERY (0 here); labels someone else added stay, and the Secret's
    keys (members trust its CA) are the same ones."""
    ns = kube_namespace
    ref = ClusterRef(ns, "edited")
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        cluster = await create_cluster(admin, ns, "edited")
        uid = cluster["metadata"]["uid"]
        runtime = KubeRuntime(op, ensure_every=0)
        await runtime.allocate_member(ref, "edited-0", ClusterSpec())
        peer_path = m.core_path(ns, "services", m.peer_service_name(ref))
        client_path = m.core_path(ns, "services", m.client_service_name(ref))
        budget_path = m.pdb_path(ns, m.disruption_budget_name(ref))
        secret_path = m.core_path(ns, "secrets", m.tls_secret_name(ref))
        keys = (await admin.get(secret_path))["data"]
        client_ip = (await admin.get(client_path))["spec"]["clusterIP"]

        await admin.merge_patch(
            peer_path,
            {
                "metadata": {"labels": {"team": "storage"}},
                "spec": {"publishNotReadyAddresses": False, "selector": {"app": "other"}},
            },
        )
        await admin.merge_patch(client_path, {"spec": {"publishNotReadyAddresses": True}})
        await admin.merge_patch(budget_path, {"spec": {"minAvailable": 1}})
        await admin.merge_patch(
            secret_path,
            {"metadata": {"ownerReferences": None, "labels": {m.LABEL_INSTANCE: None, "team": "storage"}}},
        )

        await runtime.allocate_member(ref, "edited-1", ClusterSpec())

        peer, client = await admin.get(peer_path), await admin.get(client_path)
        budget, secret = await admin.get(budget_path), await admin.get(secret_path)
        assert peer["spec"]["publishNotReadyAddresses"] is True
        assert peer["spec"]["selector"] == m.peer_record_selector(ref)
        assert peer["metadata"]["labels"] == {**m.cluster_labels(ref), "team": "storage"}
        assert "publishNotReadyAddresses" not in client["spec"]
        assert client["spec"]["clusterIP"] == client_ip
        assert "maxUnavailable" not in budget["spec"] and budget["spec"]["minAvailable"] == "100%"
        assert secret["data"] == keys
        assert secret["metadata"]["labels"] == {**m.cluster_labels(ref), "team": "storage"}
        (owner,) = secret["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("EtcdCluster", "edited", uid)


def _never() -> Any:
    raise AssertionError("the TLS Secret exists: no certificates are made")


async def test_member_pods_of_an_earlier_operator_are_labelled_before_the_peer_service_moves(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    """An operator before the peer-record label left a peer Service over member pods only, and
    member pods without the label. The Service may select by the label (and so publish warm
    pods too) only once every member pod carries it, or a member's DNS record would vanish
    under its peers: the runtime labels them first (nothing else of the pods changes), then
    moves the Service."""
    ns = kube_namespace
    ref = ClusterRef(ns, "older")
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        cluster = await create_cluster(admin, ns, "older")
        owner = m.Owner(ref, cluster["metadata"]["uid"])
        await admin.create(m.core_path(ns, "services"), m.peer_service(owner, warm_records=False))
        old_pods = ("older-0", "older-1")
        for name in old_pods:
            urls = m.member_urls(ref, name, tls=False)
            pod = m.member_pod(owner, launch_for(ref, name, urls, ClusterSpec()))
            del pod["metadata"]["labels"][m.LABEL_PEER_RECORD]
            await admin.create(m.core_path(ns, "pods"), pod)
        specs = {n: (await admin.get(m.core_path(ns, "pods", n)))["spec"] for n in old_pods}

        await KubeRuntime(op).allocate_member(ref, "older-2", ClusterSpec())

        service = await admin.get(m.core_path(ns, "services", m.peer_service_name(ref)))
        selector = service["spec"]["selector"]
        assert selector == m.peer_record_selector(ref)
        for name in old_pods:
            pod = await admin.get(m.core_path(ns, "pods", name))
            assert selector.items() <= pod["metadata"]["labels"].items(), name
            assert pod["spec"] == specs[name]

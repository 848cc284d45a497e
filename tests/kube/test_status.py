"""KubeStatusSink and KubeEventSink against a real kube-apiserver, as the deployed ServiceAccount."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.model import ClusterRef, ClusterStatus, Condition, MemberStatus, Phase, Role
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient
from supervisor.kube.status import KubeEventSink, KubeStatusSink
from tests.harness.kube import KubeAPIServer
from tests.kube.clients import clients

pytestmark = pytest.mark.slow


async def create_cluster(admin: KubeClient, ref: ClusterRef) -> dict:
    body = {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": ref.name},
        "spec": {},
    }
    return await admin.create(f"/apis/etcd.io/v1alpha1/namespaces/{ref.namespace}/etcdclusters", body)


def running(ready: int, *, generation: int = 1) -> ClusterStatus:
    return ClusterStatus(
        phase=Phase.RUNNING,
        ready_replicas=ready,
        observed_generation=generation,
        members=(
            MemberStatus(
                name="s-0",
                id="8e9e05c52164694d",
                peer_url="https://s-0.s-peer.ns.svc:2380",
                client_url="https://s-0.s-peer.ns.svc:2379",
                role=Role.LEADER,
                healthy=True,
                db_size=25_165_824,
                db_size_in_use=1_048_576,
            ),
        ),
        conditions=(Condition(type="Available", status="True", reason="QuorumHealthy"),),
        message="all members healthy",
    )


async def test_status_lands_in_the_subresource_in_crd_shape(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ref = ClusterRef(kube_namespace, "s")
    async with clients(kube_crds, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ref)
        sink = KubeStatusSink(op, now=lambda: 1_700_000_000.0)
        await sink.publish(ref, running(1))
        status = (await admin.get(m.cluster_path(ref)))["status"]
        assert status["phase"] == "Running"
        assert status["readyReplicas"] == 1
        assert status["observedGeneration"] == 1
        assert status["members"][0]["peerURL"] == "https://s-0.s-peer.ns.svc:2380"
        assert status["members"][0]["role"] == "leader"
        assert (status["members"][0]["dbSize"], status["members"][0]["dbSizeInUse"]) == (
            25_165_824,
            1_048_576,
        )
        assert status["message"] == "all members healthy"
        (cond,) = status["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == ("Available", "True", "QuorumHealthy")
        assert cond["lastTransitionTime"] == "2023-11-14T22:13:20Z"  # stamped when first set, not 1970


async def test_a_conflicting_status_write_is_retried_and_spec_untouched(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ref = ClusterRef(kube_namespace, "s")
    async with clients(kube_crds, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ref)
        clock = [1_700_000_000.0]
        sink = KubeStatusSink(op, now=lambda: clock[0])
        await sink.publish(ref, running(1))
        assert sink.statistics().conflicts == 0

        # Someone else writes meanwhile: the sink's cached resourceVersion is now stale.
        await admin.merge_patch(m.cluster_path(ref), {"spec": {"size": 5}})
        clock[0] += 60
        await sink.publish(ref, running(3, generation=2))
        assert sink.statistics() == type(sink.statistics())(writes=2, conflicts=1)

        obj = await admin.get(m.cluster_path(ref))
        assert obj["spec"]["size"] == 5  # the user's change survives the status write
        assert obj["status"]["readyReplicas"] == 3
        assert obj["status"]["observedGeneration"] == 2
        # Unchanged condition status: its transition time stays.
        assert obj["status"]["conditions"][0]["lastTransitionTime"] == "2023-11-14T22:13:20Z"

        flipped = ClusterStatus(
            phase=Phase.FAILED,
            conditions=(Condition(type="Available", status="False", reason="QuorumLost"),),
        )
        await sink.publish(ref, flipped)
        cond = (await admin.get(m.cluster_path(ref)))["status"]["conditions"][0]
        assert cond["status"] == "False" and cond["lastTransitionTime"] == "2023-11-14T22:14:20Z"


async def test_status_of_a_deleted_cluster_is_dropped(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    async with clients(kube_crds, operator_kubeconfig) as (op, _admin):
        await KubeStatusSink(op).publish(ClusterRef(kube_namespace, "gone"), running(0))


async def test_every_operation_leaves_an_event_on_the_cluster(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ref = ClusterRef(kube_namespace, "s")
    async with clients(kube_crds, operator_kubeconfig) as (op, admin):
        uid = (await create_cluster(admin, ref))["metadata"]["uid"]
        sink = KubeEventSink(op, instance="replica-a")
        await sink.record(ref, reason="MemberAdded", message="added s-1 as a learner")
        await sink.record(ref, reason="MemberPromoted", message="promoted s-1")
        await sink.record(ref, reason="QuorumLost", message="2 of 3 members down", warning=True)
        events = (await admin.get(m.core_path(kube_namespace, "events")))["items"]
        events.sort(key=lambda e: e["metadata"]["name"])
        assert [e["reason"] for e in events] == ["MemberAdded", "MemberPromoted", "QuorumLost"]
        assert [e["type"] for e in events] == ["Normal", "Normal", "Warning"]
        for event in events:
            involved = event["involvedObject"]
            assert (involved["kind"], involved["name"], involved["uid"]) == ("EtcdCluster", "s", uid)
            assert event["source"]["component"] == "etcd-supervisor"
            assert event["reportingInstance"] == "replica-a"
        assert events[0]["message"] == "added s-1 as a learner"

"""The whole operator (`etcd-supervisor run`'s pieces) against a real kube-apiserver, with the
stand-in kubelet running every member pod as a real etcd process (tests/harness/kubelet.py).

The operator authenticates as the deployed ServiceAccount, so a missing RBAC rule fails here.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.cluster_context import Timing
from supervisor.aio import open_asyncio_loop
from supervisor.etcd.client import open_etcd_client
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, open_kube_client
from supervisor.kube.clusters import KubeClusters
from supervisor.kube.leader import LeaderElectionConfig
from supervisor.kube.operator import run_operator
from tests.harness.kube import OPERATOR_NAMESPACE, KubeAPIServer
from tests.harness.kubelet import Kubelet, open_kubelet
from tests.harness.poll import eventually, until

pytestmark = pytest.mark.slow

FAST = Timing(tick=0.5, call_timeout=3.0, probe_timeout=1.0, health_ttl=2.5)
CLUSTERS = "/apis/etcd.io/v1alpha1/namespaces/{ns}/etcdclusters"


@asynccontextmanager
async def operator_with_kubelet(
    server: KubeAPIServer, operator: Path, ns: str, work: Path
) -> AsyncIterator[tuple[KubeClient, Kubelet]]:
    election = LeaderElectionConfig(
        namespace=OPERATOR_NAMESPACE,
        identity="test",
        name=f"op-{uuid.uuid4().hex[:8]}",
        lease_duration=6,
        renew_deadline=4,
        retry_period=1,
    )
    async with open_asyncio_loop(), open_kube_client(str(server.kubeconfig)) as admin:
        with open_kubelet(admin, ns, work) as kubelet:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(kubelet.run)
                await nursery.start(
                    lambda task_status: run_operator(
                        serve_clusters=KubeClusters(timing=FAST, tls_root=work / "tls").serve,
                        kubeconfig=str(operator),
                        namespaces=[ns],
                        health_port=0,
                        election=election,
                        task_status=task_status,
                    )
                )
                yield admin, kubelet
                nursery.cancel_scope.cancel()


async def wait_for(
    admin: KubeClient, path: str, predicate: Callable[[dict[str, Any]], bool], timeout: float
) -> dict[str, Any]:
    return await eventually(
        lambda: admin.get_or_none(path),
        lambda obj: obj is not None and predicate(obj),
        within=timeout,
        every=0.3,
        what=path,
    )


def cluster_body(name: str, ns: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


async def create_cluster(admin: KubeClient, name: str, ns: str, spec: dict[str, Any]) -> str:
    """Create an EtcdCluster; returns its API path."""
    await admin.create(CLUSTERS.format(ns=ns), cluster_body(name, ns, spec))
    return f"{CLUSTERS.format(ns=ns)}/{name}"


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The status condition of that type ({} when absent)."""
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == kind), {})


def healthy(size: int) -> Callable[[dict[str, Any]], bool]:
    def check(obj: dict[str, Any]) -> bool:
        status = obj.get("status") or {}
        return (
            status.get("phase") == "Running"
            and status.get("readyReplicas") == size
            and len(status.get("members", [])) == size
            and status.get("observedGeneration") == obj["metadata"]["generation"]
        )

    return check


async def event_reasons(admin: KubeClient, ns: str, name: str) -> list[str]:
    events = await admin.get(m.core_path(ns, "events"))
    return [e["reason"] for e in events["items"] if e["involvedObject"]["name"] == name]


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_create_bootstraps_one_member_at_a_time_then_scales_through_the_scale_subresource(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path, tls: bool
) -> None:
    ns = kube_namespace
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
        path = await create_cluster(admin, "demo", ns, {"size": 3, "security": {"tls": {"enabled": tls}}})
        obj = await wait_for(admin, path, healthy(3), timeout=90)

        # The shared objects, then the members in order: seed first, one at a time.
        peer = await admin.get(m.core_path(ns, "services", "demo-peer"))
        assert peer["spec"]["clusterIP"] == "None" and peer["spec"]["publishNotReadyAddresses"] is True
        await admin.get(m.core_path(ns, "services", "demo-client"))
        # First runs only: a joining etcd that could not reach the cluster in time (a loaded
        # machine) exits, and its pod is replaced; the operator's log then holds the reason.
        assert kubelet.started == ["demo-0", "demo-1", "demo-2"], kubelet.runs
        reasons = await event_reasons(admin, ns, "demo")
        assert reasons.count("LearnerAdded") == 2 and reasons.count("LearnerPromoted") == 2
        assert reasons.index("SeedStarted") < reasons.index("LearnerAdded")
        claims = await admin.get(m.core_path(ns, "persistentvolumeclaims"))
        assert sorted(c["metadata"]["name"] for c in claims["items"]) == [
            m.volume_claim_name(f"demo-{i}") for i in range(3)
        ]
        assert {mem["role"] for mem in obj["status"]["members"]} == {"leader", "follower"}

        # kubectl scale: through the scale subresource.
        kube_crds.kubectl("scale", "etcdcluster/demo", "-n", ns, "--replicas=5")
        await wait_for(admin, path, healthy(5), timeout=120)
        kube_crds.kubectl("scale", "etcdcluster/demo", "-n", ns, "--replicas=3")
        obj = await wait_for(admin, path, healthy(3), timeout=90)
        assert sorted(mem["name"] for mem in obj["status"]["members"]) == ["demo-0", "demo-1", "demo-2"]
        pods = await admin.get(m.core_path(ns, "pods"))
        assert sorted(p["metadata"]["name"] for p in pods["items"]) == ["demo-0", "demo-1", "demo-2"]


async def test_a_dead_member_pod_is_replaced_on_its_claim_and_keeps_its_data(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
        path = await create_cluster(admin, "heal", ns, {"size": 3, "security": {"tls": {"enabled": False}}})
        obj = await wait_for(admin, path, healthy(3), timeout=90)
        endpoints = [mem["clientURL"] for mem in obj["status"]["members"]]
        async with open_etcd_client(endpoints) as etcd:
            await etcd.put(b"kept", b"yes")
        victim = next(mem for mem in obj["status"]["members"] if mem["role"] == "follower")
        old_uid = (await admin.get(m.core_path(ns, "pods", victim["name"])))["metadata"]["uid"]
        kubelet.kill_process(victim["name"])

        def replaced(o: dict[str, Any]) -> bool:
            pod = kubelet.pods.get(victim["name"])
            return healthy(3)(o) and pod is not None and pod.uid != old_uid and pod.ready

        await wait_for(admin, path, replaced, timeout=90)
        new_pod = await admin.get(m.core_path(ns, "pods", victim["name"]))
        assert new_pod["metadata"]["uid"] != old_uid  # a new pod...
        obj = await admin.get(path)
        again = next(mem for mem in obj["status"]["members"] if mem["name"] == victim["name"])
        assert again["id"] == victim["id"]  # ...of the same member, from the same claim's data
        async with open_etcd_client([again["clientURL"]]) as etcd:
            kv = await etcd.range(b"kept", serializable=True)
            assert [(k.key, k.value) for k in kv] == [(b"kept", b"yes")]


@pytest.mark.parametrize("policy", ["Retain", "Delete"])
async def test_deleting_the_cluster_follows_its_reclaim_policy(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path, policy: str
) -> None:
    ns = kube_namespace
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, _kubelet):
        path = await create_cluster(
            admin,
            "gone",
            ns,
            {
                "size": 1,
                "storage": {"reclaimPolicy": policy},
                "security": {"tls": {"enabled": False}},
            },
        )
        await wait_for(admin, path, healthy(1), timeout=60)
        await admin.delete(path)
        await eventually(  # the finalizer is released
            lambda: admin.get_or_none(path),
            lambda obj: obj is None,
            within=60,
            every=0.3,
            what=f"{path} gone",
        )
        claims = await admin.get(m.core_path(ns, "persistentvolumeclaims"))
        names = [c["metadata"]["name"] for c in claims["items"] if not c["metadata"].get("deletionTimestamp")]
        assert names == ([m.volume_claim_name("gone-0")] if policy == "Retain" else [])
        pods = await admin.get(m.core_path(ns, "pods"))
        assert pods["items"] == []


async def test_a_change_only_the_daemon_can_refuse_is_reported_and_the_cluster_keeps_serving(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    """A valid document, an unsafe change: switching TLS on a live cluster is refused with a condition."""
    ns = kube_namespace
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, _kubelet):
        path = await create_cluster(admin, "steady", ns, {"size": 1, "security": {"tls": {"enabled": False}}})
        await wait_for(admin, path, healthy(1), timeout=60)
        await admin.merge_patch(path, {"spec": {"security": {"tls": {"enabled": True}}}})

        def refused(o: dict[str, Any]) -> bool:
            status = o.get("status") or {}
            return any(c["reason"] == "InvalidSpec" for c in status.get("conditions", []))

        steady = await wait_for(admin, path, refused, timeout=30)
        assert "spec.security.tls.enabled" in steady["status"]["message"]
        assert steady["status"]["phase"] == "Running" and steady["status"]["readyReplicas"] == 1
        assert steady["status"]["members"][0]["clientURL"].startswith("http://")
        reasons = await event_reasons(admin, ns, "steady")
        assert "PhaseFailed" not in reasons


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_run_command_serves_health_and_acts_as_the_service_account(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    """`etcd-supervisor run` as the Deployment runs it: health endpoints, a lease, real actions."""
    ns, port = kube_namespace, free_port()
    env = {**os.environ, "POD_NAMESPACE": OPERATOR_NAMESPACE, "POD_NAME": "cli-test"}
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "etcd-supervisor"), "--log-format", "json", "run",
         "--kubeconfig", str(operator_kubeconfig), "--namespace", ns, "--health-port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        body = cluster_body("cli", ns, {"size": 1, "security": {"tls": {"enabled": False}}})
        kube_crds.kubectl("apply", "-f", "-", input=json.dumps(body))
        pod = until(
            lambda: next(
                (
                    p
                    for p in kube_crds.get_json("pods", namespace=ns)["items"]
                    if p["metadata"]["name"] == "cli-0"
                ),
                None,
            ),
            lambda found: found is not None,
            within=60,
            every=0.3,
            what="the seed pod",
        )
        assert pod is not None, "the seed pod was never created"
        for path in ("/healthz", "/readyz"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
                assert answer.status == 200
        lease = kube_crds.get_json("lease", "etcd-supervisor", namespace=OPERATOR_NAMESPACE)
        assert lease["spec"]["holderIdentity"] == "cli-test"
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err[-3000:]


async def test_a_replacement_after_a_refused_tls_switch_keeps_the_scheme_in_force(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, _kubelet):
        path = await create_cluster(admin, "keep", ns, {"size": 3, "security": {"tls": {"enabled": False}}})
        obj = await wait_for(admin, path, healthy(3), timeout=90)
        await admin.merge_patch(path, {"spec": {"security": {"tls": {"enabled": True}}}})
        refused = "spec.security.tls.enabled"
        await wait_for(admin, path, lambda o: refused in o["status"]["message"], timeout=30)
        # A follower's volume is lost: its replacement is a new member, allocated and started
        # with the spec in force (plain), never the refused one the object now carries.
        victim = next(mem for mem in obj["status"]["members"] if mem["role"] == "follower")
        await admin.delete(m.core_path(ns, "persistentvolumeclaims", m.volume_claim_name(victim["name"])))
        await admin.delete(m.core_path(ns, "pods", victim["name"]))

        def replaced(o: dict[str, Any]) -> bool:
            members = (o.get("status") or {}).get("members", [])
            return (
                len(members) == 3
                and all(mem["healthy"] for mem in members)
                and victim["name"] not in {mem["name"] for mem in members}
            )

        obj = await wait_for(admin, path, replaced, timeout=120)
        assert all(mem["peerURL"].startswith("http://") for mem in obj["status"]["members"])
        assert all(mem["clientURL"].startswith("http://") for mem in obj["status"]["members"])


async def test_a_member_whose_pod_cannot_be_scheduled_is_reported_with_the_schedulers_reason(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    """The learner's pod is marked PodScheduled=False (Unschedulable) as the scheduler would:
    the status, a Degraded condition and a warning Event name the pod and the scheduler's
    message instead of "catching up"; once it is placed, the cluster grows as usual."""
    ns = kube_namespace
    why = "0/3 nodes are available: 3 node(s) had volume node affinity conflict."
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
        kubelet.unschedulable["held-1"] = why
        path = await create_cluster(admin, "held", ns, {"size": 1, "security": {"tls": {"enabled": False}}})
        await wait_for(admin, path, healthy(1), timeout=60)
        await admin.merge_patch(path, {"spec": {"size": 2}})

        def says_why(obj: dict[str, Any]) -> bool:
            status = obj.get("status") or {}
            degraded = {c["type"]: c for c in status.get("conditions", [])}.get("Degraded") or {}
            return (
                status.get("message") == f"learner held-1: pod cannot be scheduled: {why}"
                and degraded.get("reason") == "MemberUnschedulable"
                and degraded.get("message") == f"pod held-1 cannot be scheduled: {why}"
            )

        await wait_for(admin, path, says_why, timeout=60)
        events = (await admin.get(m.core_path(ns, "events")))["items"]
        warned = [e for e in events if e["reason"] == "MemberUnschedulable"]
        assert [(e["type"], e["message"]) for e in warned] == [
            ("Warning", f"pod held-1 cannot be scheduled: {why}")
        ]

        del kubelet.unschedulable["held-1"]
        await wait_for(admin, path, healthy(2), timeout=90)

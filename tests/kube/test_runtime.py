"""KubeRuntime against a real kube-apiserver, authenticated as the deployed ServiceAccount.

There is no kubelet, scheduler or garbage collector: the tests play the kubelet (bind pods,
write pod status through pods/status as admin) and check what the runtime reads back.
"""

from __future__ import annotations

import base64
import functools
import logging
from pathlib import Path
from typing import Any

import pytest
import trio
from cryptography import x509

from actors.errors import NamespaceTerminating, RuntimeRefused, StepFailed
from actors.model import ClusterRef, ClusterSpec, MemberLaunch, ProcessState
from supervisor.kube import manifests as m
from supervisor.kube import pod_nudge as nudge
from supervisor.kube import warm_members as warm
from supervisor.kube.client import KubeClient, KubeError, is_namespace_terminating
from supervisor.kube.finalizer import ClusterGone, add_finalizer
from supervisor.kube.runtime import KubeRuntime
from supervisor.kube.snapshot_pods import snapshot_pod_labels
from supervisor.kube.snapshots import SnapshotPodFailed, open_snapshot_pod, wait_for_pod
from supervisor.kube.status import KubeEventSink
from tests.harness.kube import KubeAPIServer
from tests.harness.poll import eventually
from tests.kube.clients import clients

pytestmark = pytest.mark.slow


async def create_cluster(admin: KubeClient, ns: str, name: str, **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"size": 3, **spec},
    }
    return await admin.create(f"/apis/etcd.io/v1alpha1/namespaces/{ns}/etcdclusters", body)


def launch_for(ref: ClusterRef, name: str, urls: Any, spec: ClusterSpec) -> MemberLaunch:
    return MemberLaunch(
        cluster=ref,
        name=name,
        urls=urls,
        initial_cluster=((name, urls.peer_url),),
        initial_cluster_state="new",
        spec=spec,
    )


async def play_kubelet(
    admin: KubeClient, ns: str, pod: str, *, phase: str, ready: bool, message: str = ""
) -> None:
    path = m.core_path(ns, "pods", pod)
    obj = await admin.get(path)
    terminated = phase in ("Failed", "Succeeded")
    obj["status"] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [
            {
                "name": "etcd",
                "image": obj["spec"]["containers"][0]["image"],
                "imageID": "",
                "ready": ready,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": 1 if phase == "Failed" else 0,
                        "message": message,
                        "startedAt": "2025-01-01T00:00:00Z",
                        "finishedAt": "2025-01-01T00:00:03Z",
                    }
                }
                if terminated
                else {"running": {"startedAt": "2025-01-01T00:00:00Z"}},
            }
        ],
    }
    await admin.replace(f"{path}/status", obj)


async def test_start_creates_owned_services_budget_claim_and_pod(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ns = kube_namespace
    ref = ClusterRef(ns, "alpha")
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        cluster = await create_cluster(admin, ns, "alpha")
        uid = cluster["metadata"]["uid"]
        runtime = KubeRuntime(op)

        urls = await runtime.allocate_member(ref, "alpha-0", ClusterSpec())
        assert urls.peer_url == f"https://alpha-0.alpha-peer.{ns}.svc.cluster.local:2380"
        assert urls.client_url == f"https://alpha-0.alpha-peer.{ns}.svc.cluster.local:2379"

        peer = await admin.get(m.core_path(ns, "services", "alpha-peer"))
        assert peer["spec"]["clusterIP"] == "None"
        assert peer["spec"]["publishNotReadyAddresses"] is True
        client_svc = await admin.get(m.core_path(ns, "services", "alpha-client"))
        assert client_svc["spec"]["clusterIP"] not in ("None", "")
        pdb = await admin.get(m.pdb_path(ns, "alpha"))
        # No membership read yet (no admin ran): nothing admitted until the voters are known.
        assert pdb["spec"]["minAvailable"] == "100%"
        secret = await admin.get(m.core_path(ns, "secrets", "alpha-tls"))
        assert {"ca.crt", "tls.crt", "tls.key"} <= set(secret["data"])
        cluster = await admin.get(m.cluster_path(ref))
        assert m.FINALIZER in cluster["metadata"]["finalizers"]

        spec = ClusterSpec(size=3)
        await runtime.start_member(launch_for(ref, "alpha-0", urls, spec))
        await runtime.start_member(launch_for(ref, "alpha-0", urls, spec))  # idempotent
        pod = await admin.get(m.core_path(ns, "pods", "alpha-0"))
        pvc = await admin.get(m.core_path(ns, "persistentvolumeclaims", "alpha-0-data"))
        for obj in (peer, client_svc, pdb, secret, pod, pvc):
            (owner,) = obj["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"]) == ("EtcdCluster", "alpha", uid)
        # The pod's role is not known before a membership read: not counted as a voter yet.
        pod_only = {"etcd.io/voter": "false", "etcd.io/peer-record": "true"}
        for obj, voter in ((pod, pod_only), (pvc, {})):
            assert obj["metadata"]["labels"] == {
                "app.kubernetes.io/name": "etcd",
                "app.kubernetes.io/instance": "alpha",
                "app.kubernetes.io/component": "member",
                "app.kubernetes.io/managed-by": "etcd-supervisor",
                "etcd.io/member": "alpha-0",
                **voter,
            }
        assert pod["spec"]["hostname"] == "alpha-0"
        assert pod["spec"]["subdomain"] == "alpha-peer"
        assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "alpha-0-data"

        (member,) = await runtime.list_members(ref)
        assert member.name == "alpha-0" and member.urls == urls
        assert member.state is ProcessState.STARTING and member.has_data and member.pid is None

        # The kubelet's part: bind the pod to a node, run it, report it ready.
        await admin.create(
            f"{m.core_path(ns, 'pods', 'alpha-0')}/binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "alpha-0"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
            },
        )
        await play_kubelet(admin, ns, "alpha-0", phase="Running", ready=False)
        assert (await runtime.list_members(ref))[0].state is ProcessState.STARTING
        await play_kubelet(admin, ns, "alpha-0", phase="Running", ready=True)
        (member,) = await runtime.list_members(ref)
        assert member.state is ProcessState.RUNNING and member.consecutive_failures == 0


async def test_cluster_domain_reaches_urls_pods_and_certificates(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    # What `run --cluster-domain` hands KubeRuntime must show wherever a member's name does.
    ns, domain = kube_namespace, "k8s.corp.example"
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        runtime = KubeRuntime(op, cluster_domain="K8s.Corp.Example.")
        official, bitnami = ClusterRef(ns, "dom"), ClusterRef(ns, "bdom")
        await create_cluster(admin, ns, "dom")
        await create_cluster(
            admin, ns, "bdom", repository="bitnami/etcd", security={"tls": {"enabled": False}}
        )

        urls = await runtime.allocate_member(official, "dom-0", ClusterSpec())
        assert urls.client_url == f"https://dom-0.dom-peer.{ns}.svc.{domain}:2379"
        await runtime.start_member(launch_for(official, "dom-0", urls, ClusterSpec()))
        args = (await admin.get(m.core_path(ns, "pods", "dom-0")))["spec"]["containers"][0]["args"]
        assert f"--initial-advertise-peer-urls=https://dom-0.dom-peer.{ns}.svc.{domain}:2380" in args
        secret = await admin.get(m.core_path(ns, "secrets", "dom-tls"))
        cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert {f"*.dom-peer.{ns}.svc.{domain}", f"*.dom-peer.{ns}.svc"} <= set(
            sans.get_values_for_type(x509.DNSName)
        )

        spec = ClusterSpec(repository="bitnami/etcd", tls_enabled=False)
        burls = await runtime.allocate_member(bitnami, "bdom-0", spec)
        await runtime.start_member(launch_for(bitnami, "bdom-0", burls, spec))
        container = (await admin.get(m.core_path(ns, "pods", "bdom-0")))["spec"]["containers"][0]
        assert f"--advertise-client-urls=http://bdom-0.bdom-peer.{ns}.svc.{domain}:2379" in container["args"]


async def test_watch_members_reports_pod_and_claim_changes(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ns = kube_namespace
    ref = ClusterRef(ns, "beta")
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ns, "beta", security={"tls": {"enabled": False}})
        runtime = KubeRuntime(op)
        changed: list[str] = []
        other: list[str] = []

        def broken(name: str) -> None:
            raise RuntimeError("a buggy subscriber must not end the watch nor silence the others")

        runtime.watch_members(ref, broken)
        unsubscribe = runtime.watch_members(ref, changed.append)
        runtime.watch_members(ClusterRef(ns, "someone-else"), other.append)
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: runtime.run(namespaces=[ns], task_status=task_status))
            urls = await runtime.allocate_member(ref, "beta-0", ClusterSpec(tls_enabled=False))
            await runtime.start_member(launch_for(ref, "beta-0", urls, ClusterSpec(tls_enabled=False)))
            await eventually(lambda: "beta-0" in changed, within=20, every=0.05, what="beta-0 changed")
            changed.clear()
            await play_kubelet(admin, ns, "beta-0", phase="Running", ready=True)
            await eventually(lambda: "beta-0" in changed, within=20, every=0.05, what="beta-0 changed")
            unsubscribe()
            changed.clear()
            await runtime.stop_member(ref, "beta-0")
            await trio.sleep(1.0)
            assert changed == [] and other == []
            nursery.cancel_scope.cancel()


async def test_image_families_get_their_own_configuration(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ns = kube_namespace
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        runtime = KubeRuntime(op)
        pods = {}
        for name, repository in (("bit", "bitnami/etcd"), ("off", "quay.io/coreos/etcd")):
            await create_cluster(admin, ns, name, repository=repository, security={"tls": {"enabled": False}})
            ref = ClusterRef(ns, name)
            spec = ClusterSpec(repository=repository, tls_enabled=False)
            urls = await runtime.allocate_member(ref, f"{name}-0", spec)
            await runtime.start_member(launch_for(ref, f"{name}-0", urls, spec))
            pods[name] = (await admin.get(m.core_path(ns, "pods", f"{name}-0")))["spec"]

        # Bitnami's: its etcd binary with our flags as uid 1001, its volume given to 1001 first.
        bitnami = pods["bit"]["containers"][0]
        assert bitnami["image"] == "bitnami/etcd:3.6.16"
        assert bitnami["command"] == ["/opt/bitnami/etcd/bin/etcd"] and "--name=bit-0" in bitnami["args"]
        assert "env" not in bitnami and bitnami["securityContext"]["runAsUser"] == 1001
        assert [c["command"][0] for c in pods["bit"]["initContainers"]] == ["chown"]

        official = pods["off"]["containers"][0]
        assert official["image"] == "quay.io/coreos/etcd:v3.6.16"
        assert official["command"] == ["/usr/local/bin/etcd"] and "--name=off-0" in official["args"]
        assert "env" not in official and "initContainers" not in pods["off"]
        assert official["readinessProbe"] == bitnami["readinessProbe"]


async def test_stop_keeps_the_claim_restart_reuses_it_delete_removes_it(
    kube_apiserver: KubeAPIServer,
    operator_kubeconfig: Path,
    kube_namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ns = kube_namespace
    ref = ClusterRef(ns, "gamma")
    spec = ClusterSpec(tls_enabled=False)
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ns, "gamma", security={"tls": {"enabled": False}})
        runtime = KubeRuntime(op, poll_interval=0.1)
        urls = await runtime.allocate_member(ref, "gamma-0", spec)
        launch = launch_for(ref, "gamma-0", urls, spec)
        await runtime.start_member(launch)
        first_uid = (await admin.get(m.core_path(ns, "pods", "gamma-0")))["metadata"]["uid"]

        await runtime.stop_member(ref, "gamma-0")
        await runtime.stop_member(ref, "gamma-0")  # idempotent
        assert await admin.get_or_none(m.core_path(ns, "pods", "gamma-0")) is None
        (member,) = await runtime.list_members(ref)
        assert member.state is ProcessState.ABSENT and member.has_data and member.urls == urls

        # Restart with data: a new pod on the same claim.
        await runtime.start_member(launch)
        pod = await admin.get(m.core_path(ns, "pods", "gamma-0"))
        assert pod["metadata"]["uid"] != first_uid
        assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "gamma-0-data"

        # A crashed pod is replaced, and the crash is counted on its successor. Its whole
        # log tail goes to the operator's log first: the status keeps only the last line.
        tail = "dialing the seed\ndiscovery failed\n"
        await play_kubelet(admin, ns, "gamma-0", phase="Failed", ready=False, message=tail)
        (member,) = await runtime.list_members(ref)
        assert member.state is ProcessState.EXITED and member.exit_code == 1
        assert member.consecutive_failures == 1 and member.last_error == "discovery failed"
        with caplog.at_level(logging.WARNING, logger="supervisor.kube.runtime"):
            await runtime.start_member(launch)
        (exit_line,) = [r.getMessage() for r in caplog.records if "exited with code 1" in r.getMessage()]
        assert exit_line.endswith("its log ended:\n    dialing the seed\n    discovery failed")
        pod = await admin.get(m.core_path(ns, "pods", "gamma-0"))
        assert pod["metadata"]["annotations"][m.ANNOTATION_FAILURES] == "1"
        assert (await runtime.list_members(ref))[0].state is ProcessState.STARTING

        # A claim a restore is filling (supervisor/kube/snapshots.py marks it) holds no data
        # yet, also for a new operator after the one restoring died.
        claim = m.core_path(ns, "persistentvolumeclaims", "gamma-0-data")
        await op.merge_patch(claim, {"metadata": {"annotations": {m.ANNOTATION_RESTORING: "k.db"}}})
        assert not (await runtime.list_members(ref))[0].has_data
        await op.merge_patch(claim, {"metadata": {"annotations": {m.ANNOTATION_RESTORING: None}}})
        assert (await runtime.list_members(ref))[0].has_data

        await runtime.delete_member(ref, "gamma-0")
        await runtime.delete_member(ref, "gamma-0")  # idempotent
        assert await admin.get_or_none(m.core_path(ns, "pods", "gamma-0")) is None
        assert await admin.get_or_none(m.core_path(ns, "persistentvolumeclaims", "gamma-0-data")) is None
        assert await runtime.list_members(ref) == []


@pytest.mark.parametrize("policy", ["Retain", "Delete"])
async def test_cluster_deletion_follows_the_reclaim_policy(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, policy: str
) -> None:
    ns = kube_namespace
    ref = ClusterRef(ns, "delta")
    spec = ClusterSpec(tls_enabled=True)
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ns, "delta", storage={"reclaimPolicy": policy})
        runtime = KubeRuntime(op)
        for name in ("delta-0", "delta-1"):
            urls = await runtime.allocate_member(ref, name, spec)
            await runtime.start_member(launch_for(ref, name, urls, spec))

        # The user deletes the cluster: our finalizer holds it until the volumes are handled.
        await admin.delete(m.cluster_path(ref))
        held = await admin.get(m.cluster_path(ref))
        assert held["metadata"]["deletionTimestamp"]
        with pytest.raises(ClusterGone):
            await runtime.allocate_member(ref, "delta-2", spec)

        await runtime.delete_cluster(ref, keep_data=policy == "Retain")
        assert await admin.get_or_none(m.cluster_path(ref)) is None
        claims = await admin.get(
            m.core_path(ns, "persistentvolumeclaims"),
            query={"labelSelector": m.label_selector(m.member_selector(ref))},
        )
        pods = await admin.get(m.core_path(ns, "pods"), query={"labelSelector": m.MEMBER_SELECTOR})
        assert pods["items"] == []
        for path in (m.core_path(ns, "services", "delta-peer"), m.pdb_path(ns, "delta")):
            assert await admin.get_or_none(path) is None
        if policy == "Retain":
            names = sorted(c["metadata"]["name"] for c in claims["items"])
            assert names == ["delta-0-data", "delta-1-data"]
            # Orphaned, so a garbage collector would not take them with the cluster.
            assert all(not c["metadata"].get("ownerReferences") for c in claims["items"])
        else:
            assert claims["items"] == []
        await runtime.delete_cluster(ref, keep_data=True)  # idempotent once gone


async def test_a_missing_cluster_is_reported_not_created(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    async with clients(kube_apiserver, operator_kubeconfig) as (op, _admin):
        runtime = KubeRuntime(op)
        with pytest.raises(ClusterGone):
            await runtime.allocate_member(ClusterRef(kube_namespace, "nope"), "nope-0", ClusterSpec())
        assert await runtime.list_members(ClusterRef(kube_namespace, "nope")) == []
        with pytest.raises(KubeError) as denied:
            await op.delete(f"/api/v1/namespaces/{kube_namespace}")
        assert denied.value.status == 403  # it really runs with the deployed rights only


async def test_allocation_follows_the_spec_in_force_not_a_refused_edit_on_the_object(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ns = kube_namespace
    ref = ClusterRef(ns, "eps")
    in_force = ClusterSpec(tls_enabled=False)
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ns, "eps", security={"tls": {"enabled": False}})
        runtime = KubeRuntime(op)
        await runtime.allocate_member(ref, "eps-0", in_force)
        # The user switches TLS on; the cluster actor refuses it and keeps the spec in force.
        await admin.merge_patch(m.cluster_path(ref), {"spec": {"security": {"tls": {"enabled": True}}}})
        urls = await runtime.allocate_member(ref, "eps-1", in_force)
        assert urls.peer_url.startswith("http://") and urls.client_url.startswith("http://")
        await runtime.start_member(launch_for(ref, "eps-1", urls, in_force))
        pod = await admin.get(m.core_path(ns, "pods", "eps-1"))
        assert not any("cert" in arg for arg in pod["spec"]["containers"][0]["args"])
        assert await admin.get_or_none(m.core_path(ns, "secrets", m.tls_secret_name(ref))) is None


async def test_a_start_the_api_server_refuses_fails_the_step_instead_of_crashing_the_actor(
    kube_apiserver: KubeAPIServer,
    operator_kubeconfig: Path,
    kube_namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A namespace being deleted takes no new pod: the start is a failed step, not a crash of
    the actor, and one told apart (NamespaceTerminating) from refusals that are held off and
    retried: the cluster actor takes no more steps on it (tests/actors/test_namespace_deletion.py)."""
    ns = kube_namespace
    ref = ClusterRef(ns, "alpha")
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ns, "alpha")
        runtime = KubeRuntime(op)
        spec = ClusterSpec(size=1)
        urls = await runtime.allocate_member(ref, "alpha-0", spec)
        # Another 403, the operator's rights (it may not delete namespaces), is no such thing.
        with pytest.raises(KubeError) as not_allowed:
            await op.delete(f"/api/v1/namespaces/{ns}")
        assert not_allowed.value.status == 403 and not is_namespace_terminating(not_allowed.value)
        await admin.delete(f"/api/v1/namespaces/{ns}")  # stays Terminating: no namespace controller here
        with pytest.raises(RuntimeRefused) as refused:
            await runtime.start_member(launch_for(ref, "alpha-0", urls, spec))
        assert isinstance(refused.value, StepFailed)
        assert "403" in str(refused.value) and "being terminated" in str(refused.value)
        # Told apart from other refusals: the cluster actor stops its steps on this one.
        assert isinstance(refused.value, NamespaceTerminating)
        # Nor does the namespace take an Event: expected, so not a warning.
        with caplog.at_level(logging.INFO, logger="supervisor.kube.status"):
            await KubeEventSink(op).record(ref, reason="StartMemberFailed", message="refused")
        unrecorded = [r for r in caplog.records if "not recorded" in r.getMessage()]
        assert [r.levelno for r in unrecorded] == [logging.INFO], caplog.text


async def test_refusals_of_calls_made_side_by_side_fail_the_step_too(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    """The Services, budget, Secret and claim a first member needs are made side by side; the
    API server refusing them is one failed step, not an exception group that crashes the actor."""
    ns = kube_namespace
    ref = ClusterRef(ns, "alpha")
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ns, "alpha")
        await admin.delete(f"/api/v1/namespaces/{ns}")  # stays Terminating: nothing new is taken
        with pytest.raises(RuntimeRefused) as refused:
            await KubeRuntime(op).allocate_member(ref, "alpha-0", ClusterSpec(size=1))
        assert "403" in str(refused.value) and "being terminated" in str(refused.value)
        assert isinstance(refused.value, NamespaceTerminating)


async def test_pods_made_ahead_are_made_in_the_order_their_members_come(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ns = kube_namespace
    ref = ClusterRef(ns, "ahead")
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ns, "ahead")
        runtime = KubeRuntime(op, helper_image="example.test/etcd-supervisor:1")
        spec = ClusterSpec(size=5)
        urls = await runtime.allocate_member(ref, "ahead-0", spec)
        await runtime.start_member(launch_for(ref, "ahead-0", urls, spec))
        query = {"labelSelector": m.label_selector(warm.warm_selector(ref))}
        made = (await admin.list_all(m.core_path(ns, "pods"), query=query))["items"]
        # The API server here keeps its objects in etcd, where a resourceVersion is the
        # revision of the write: it orders the creations.
        in_order = sorted(made, key=lambda pod: int(pod["metadata"]["resourceVersion"]))
        assert [pod["metadata"]["name"] for pod in in_order] == ["ahead-1", "ahead-2", "ahead-3", "ahead-4"]


async def _first_cold_pod(runtime: KubeRuntime, admin: KubeClient, launch: MemberLaunch) -> dict[str, Any]:
    """The member's pod as first seen not warm while start_member runs: its warm pod adopted, or
    a pod made in its place (the start is then cancelled: no kubelet runs here, so an adopted
    pod's wait for its gate would last warm.WARM_SETUP, 10 s, in vain)."""
    path = m.core_path(launch.cluster.namespace, "pods", launch.name)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runtime.start_member, launch)
        # get_or_none: a warm pod replaced is gone for a moment before the new one is made.
        pod = await eventually(
            lambda: admin.get_or_none(path),
            lambda pod: pod is not None and not warm.is_warm(pod),
            within=5,
            every=0.05,
            what="a pod that is not warm",
        )
        nursery.cancel_scope.cancel()
    assert pod is not None
    return pod


async def test_a_warm_pod_is_adopted_before_its_gate_is_waited_for(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    """A kubelet that read a warm pod's claim as not yet bound gives the pod up, and tries again
    only about 10 s later; an update of the pod makes it try at once. Adopting the pod (its new
    labels) is that update, so it comes before the wait for the pod's address and gate, not
    after. No kubelet runs here: the pod never gets an address, as one given up would not."""
    ns = kube_namespace
    ref = ClusterRef(ns, "early")
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ns, "early")
        runtime = KubeRuntime(op, helper_image="example.test/etcd-supervisor:1", poll_interval=0.1)
        spec = ClusterSpec(size=3)
        seed = launch_for(ref, "early-0", await runtime.allocate_member(ref, "early-0", spec), spec)
        await runtime.start_member(seed)  # and makes early-1's warm pod
        learner = warm.next_launch(seed, cluster_domain=m.DEFAULT_CLUSTER_DOMAIN)
        assert learner is not None and learner.name == "early-1"
        assert await runtime.allocate_member(ref, "early-1", spec) == learner.urls
        pod = await _first_cold_pod(runtime, admin, learner)
        assert pod["metadata"]["labels"] == {**m.member_labels(ref, "early-1"), m.LABEL_PEER_RECORD: "true"}
        assert not (pod.get("status") or {}).get("podIP")


async def test_a_warm_pod_made_before_a_node_was_lost_is_replaced_by_one_kept_off_it(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    """A node lost after a warm pod was made (it may sit there): the member's start does not
    adopt the warm pod, which lacks the keep-off rule, but makes the member's pod kept off that
    node, as a pod made without warming would be."""
    ns = kube_namespace
    ref = ClusterRef(ns, "lost")
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ns, "lost")
        runtime = KubeRuntime(op, helper_image="example.test/etcd-supervisor:1", poll_interval=0.1)
        spec = ClusterSpec(size=3)
        seed = launch_for(ref, "lost-0", await runtime.allocate_member(ref, "lost-0", spec), spec)
        await runtime.start_member(seed)  # and makes lost-1's warm pod
        learner = warm.next_launch(seed, cluster_domain=m.DEFAULT_CLUSTER_DOMAIN)
        assert learner is not None
        path = m.core_path(ns, "pods", learner.name)
        made_ahead = await admin.get(path)
        assert warm.is_warm(made_ahead)
        # What delete_member records when it force-deletes a stranded member's pod.
        runtime._lost_nodes[ref] = {"node-x": trio.current_time()}
        await runtime.allocate_member(ref, learner.name, spec)
        # The first pod of that name that is not warm: adopted, it would be the same pod.
        pod = await _first_cold_pod(runtime, admin, learner)
        assert pod["metadata"]["uid"] != made_ahead["metadata"]["uid"]
        required = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        off = {"key": "metadata.name", "operator": "NotIn", "values": ["node-x"]}
        assert all(off in term["matchFields"] for term in required["nodeSelectorTerms"])


async def test_a_new_pod_on_its_node_without_an_address_is_nudged_until_it_has_one(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    """pod_nudge.py: the kubelet tries a pod whose first sync failed again only about 10 s
    later, unless the pod is updated meanwhile. No kubelet runs here: the test binds the pod to
    a node (as the scheduler would) and later gives it an address (as the kubelet would)."""
    ns = kube_namespace
    ref = ClusterRef(ns, "nudged")
    spec = ClusterSpec(tls_enabled=False)

    def nudges(pod: dict[str, Any]) -> str | None:
        return (pod["metadata"].get("annotations") or {}).get(nudge.ANNOTATION_NUDGED)

    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin), trio.open_nursery() as nursery:
        await create_cluster(admin, ns, "nudged", security={"tls": {"enabled": False}})
        runtime = KubeRuntime(op, nudge_after=0.3)
        await nursery.start(functools.partial(runtime.run, namespaces=[ns]))
        urls = await runtime.allocate_member(ref, "nudged-0", spec)
        await runtime.start_member(launch_for(ref, "nudged-0", urls, spec))
        path = m.core_path(ns, "pods", "nudged-0")
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "nudged-0"}}
        await admin.create(f"{path}/binding", {**binding, "target": {"kind": "Node", "name": "node-a"}})
        pod = await eventually(
            lambda: admin.get(path), lambda pod: nudges(pod) is not None, within=5, every=0.05, what="a nudge"
        )
        assert nudges(pod) == "1"
        pod["status"] = {**(pod.get("status") or {}), "podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.9"}]}
        await admin.replace(f"{path}/status", pod)
        await trio.sleep(1.0)  # three more rounds, were it still without an address
        assert nudges(await admin.get(path)) == "1"
        nursery.cancel_scope.cancel()


async def test_a_snapshot_pod_set_aside_is_nudged_while_it_is_waited_for(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    """A restore's pod mounts the seed's new claim, so its first sync can fail as a member
    pod's can (pod_nudge.py): wait_for_pod nudges it while it polls. Bound to a node by the
    test, as the scheduler would; it never gets an address, so only the nudge ends the wait."""
    ns = kube_namespace
    ref = ClusterRef(ns, "restoring")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "restoring-restore-1", "labels": snapshot_pod_labels(ref, "restore")},
        "spec": {"containers": [{"name": "restore", "image": "etcd:test"}]},
    }

    def nudges(pod: dict[str, Any]) -> str | None:
        return (pod["metadata"].get("annotations") or {}).get(nudge.ANNOTATION_NUDGED)

    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        async with open_snapshot_pod(op, ref, pod) as name:
            path = m.core_path(ns, "pods", name)
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}}
            await admin.create(f"{path}/binding", {**binding, "target": {"kind": "Node", "name": "node-a"}})
            with trio.fail_after(nudge.NUDGE_AFTER + 5):
                assert await wait_for_pod(op, path, nudges) == "1"
        assert await admin.get_or_none(path) is None
        # What fails in the block reaches the caller as itself (the restorers catch these by
        # type; a task running beside the block would wrap them in an ExceptionGroup).
        with pytest.raises(SnapshotPodFailed, match="the seed's claim"):
            async with open_snapshot_pod(op, ref, pod) as name:
                raise SnapshotPodFailed("the seed's claim is gone")
        assert await admin.get_or_none(m.core_path(ns, "pods", name)) is None


async def test_the_finalizer_is_added_over_a_status_written_in_between(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    """The cluster actor writes the status beside the step it announces, so the object a step
    read is often stale by the time the step adds the finalizer: the compare-and-swap answers
    409 Conflict, and the runtime reads again instead of failing the step (a held-off second)."""
    ns = kube_namespace
    ref = ClusterRef(ns, "raced")
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        read = await create_cluster(admin, ns, "raced")
        written = {**read, "status": {"phase": "Creating"}}
        await admin.replace(f"{m.cluster_path(ref)}/status", written)
        await add_finalizer(op, ref, read)  # `read` is one write behind now
        now = await admin.get(m.cluster_path(ref))
        assert m.FINALIZER in now["metadata"]["finalizers"]
        assert now["status"]["phase"] == "Creating"


async def test_a_member_whose_objects_are_terminating_is_listed_as_being_deleted(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    """A deleted pod waits out its grace period and a claim its protection finalizer: the member
    is listed meanwhile, and says its deletion is under way (the planner must not delete it
    again and again). A finalizer of the test's own holds both objects here."""
    ns = kube_namespace
    ref = ClusterRef(ns, "delta")
    spec = ClusterSpec(tls_enabled=False)
    hold = {"metadata": {"finalizers": ["test.etcd.io/hold"]}}
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ns, "delta", security={"tls": {"enabled": False}})
        runtime = KubeRuntime(op, poll_interval=0.1)
        urls = await runtime.allocate_member(ref, "delta-0", spec)
        await runtime.start_member(launch_for(ref, "delta-0", urls, spec))
        pod = m.core_path(ns, "pods", "delta-0")
        claim = m.core_path(ns, "persistentvolumeclaims", m.volume_claim_name("delta-0"))
        for path in (pod, claim):
            await admin.merge_patch(path, hold)

        await runtime.stop_member(ref, "delta-0")  # the pod goes, the claim stays
        (member,) = await runtime.list_members(ref)
        assert not member.deleting

        await runtime.delete_member(ref, "delta-0")
        (member,) = await runtime.list_members(ref)
        assert member.deleting and member.name == "delta-0"

        for path in (pod, claim):
            await admin.merge_patch(path, {"metadata": {"finalizers": None}})
        await wait_until_listed(runtime, ref, [])


async def wait_until_listed(runtime: KubeRuntime, ref: ClusterRef, names: list[str]) -> None:
    async def listed() -> list[str]:
        return [r.name for r in await runtime.list_members(ref)]

    await eventually(listed, lambda listing: listing == names, within=10, what=f"members {names}")

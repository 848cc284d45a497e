"""The cluster's NetworkPolicy on a real kube-apiserver, as the deployed operator's ServiceAccount
(its RBAC): made with the cluster's other objects, taken by the API server as built (so nothing
is rewritten when nothing drifted), a hand edit set back, a spec change applied at once by
keep_network_policy (clientSelector changed, networkPolicy false deletes it, true makes it
again), and deleted with the cluster. That it is enforced: tests/nodes/test_network_policy.py."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from actors.model import ClusterRef, ClusterSpec
from supervisor.kube import cluster_objects as objects
from supervisor.kube import manifests as m
from supervisor.kube import network_policy as np
from supervisor.kube.runtime import KubeRuntime
from tests.harness.kube import KubeAPIServer
from tests.kube.clients import clients
from tests.kube.test_runtime import create_cluster

pytestmark = pytest.mark.slow

ACCESS = np.OperatorAccess(
    namespace="etcd-supervisor",
    pod_labels={"app.kubernetes.io/name": "etcd-supervisor"},
    cidrs=("10.245.0.1/32",),
    monitoring_namespace="monitoring",
)


async def test_the_policy_follows_the_cluster_and_its_spec(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ns = kube_namespace
    ref = ClusterRef(ns, "fenced")
    path = np.networkpolicy_path(ns, np.network_policy_name(ref))
    selector = {"matchExpressions": [{"key": "etcd-client", "operator": "In", "values": ["fenced"]}]}
    spec = attrs.evolve(ClusterSpec(), client_selector=selector)
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        cluster = await create_cluster(admin, ns, "fenced")
        owner = m.Owner(ref, cluster["metadata"]["uid"])
        runtime = KubeRuntime(op, ensure_every=0, access=ACCESS)
        await runtime.allocate_member(ref, "fenced-0", spec)

        live = await admin.get(path)
        built = np.network_policy(owner, spec, ACCESS)
        assert live["spec"] == built["spec"]  # as built: the API server defaults nothing away
        assert live["metadata"]["ownerReferences"] == [m.owner_reference(owner)]
        assert (
            objects.corrected(live, built, objects.network_policy_object(spec, ACCESS).owned, owner) is None
        )

        # A hand edit (the peer port opened to all) is set back at the next member step.
        await admin.merge_patch(path, {"spec": {"ingress": [{"ports": [{"port": m.PEER_PORT}]}]}})
        await runtime.allocate_member(ref, "fenced-1", spec)
        assert (await admin.get(path))["spec"] == built["spec"]

        # Spec changes apply now, and only a change writes.
        version = (await admin.get(path))["metadata"]["resourceVersion"]
        await runtime.keep_network_policy(owner, spec)
        await runtime.keep_network_policy(owner, spec)
        assert (await admin.get(path))["metadata"]["resourceVersion"] == version
        plain = ClusterSpec()
        await runtime.keep_network_policy(owner, plain)
        assert (await admin.get(path))["spec"] == np.network_policy(owner, plain, ACCESS)["spec"]
        await runtime.keep_network_policy(owner, attrs.evolve(plain, network_policy=False))
        assert await admin.get_or_none(path) is None
        await runtime.keep_network_policy(owner, plain)
        assert (await admin.get(path))["spec"] == np.network_policy(owner, plain, ACCESS)["spec"]

        # networkPolicy false at a member step: deleted there too.
        await runtime.allocate_member(ref, "fenced-2", attrs.evolve(plain, network_policy=False))
        assert await admin.get_or_none(path) is None
        await runtime.allocate_member(ref, "fenced-2", plain)
        assert await admin.get_or_none(path) is not None

        await runtime.delete_cluster(ref, keep_data=False)
        assert await admin.get_or_none(path) is None

"""The member to come has its DNS record before it is added (manifests.peer_service says why):
the warm pod the operator makes ahead of a member is published by the peer Service under the
member's name, so etcd's leader, looking the new learner up the moment it is added, finds it,
even through a DNS that keeps denials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from actors.codec import parse_spec
from actors.model import ClusterRef, MemberLaunch
from supervisor.aio import open_asyncio_loop
from supervisor.kube import manifests as m
from supervisor.kube import warm_members as warm
from supervisor.kube.client import open_kube_client
from supervisor.kube.runtime import KubeRuntime
from tests.harness import images
from tests.harness.cluster import Cluster
from tests.harness.dns_query import NOERROR, dns_query
from tests.harness.formation import etcd_cluster
from tests.harness.nodes import Nodes
from tests.harness.poll import until

pytestmark = pytest.mark.slow


async def _start_the_seed(kubeconfig: Path, ref: ClusterRef, resource: dict) -> None:
    """What the operator does for a new cluster's first member: its pod, and the next members'
    warm pods beside it. No member after the seed is ever added here."""
    spec = parse_spec(resource["spec"])
    async with open_asyncio_loop(), open_kube_client(str(kubeconfig)) as client:
        runtime = KubeRuntime(client, helper_image=images.OPERATOR_IMAGE)
        seed = f"{ref.name}-0"
        urls = await runtime.allocate_member(ref, seed, spec)
        await runtime.start_member(MemberLaunch(ref, seed, urls, ((seed, urls.peer_url),), "new", spec))


def test_a_warm_pods_member_name_resolves_before_the_member_is_added(
    three_nodes: Nodes, etcd_nodes: Cluster, nodes_namespace: str
) -> None:
    ns, name = nodes_namespace, "early"
    ref = ClusterRef(ns, name)
    resource = etcd_cluster(name, etcd_nodes.etcd_version, tls=False)
    etcd_nodes.apply([resource], namespace=ns)
    try:
        trio.run(_start_the_seed, three_nodes.kubeconfig, ref, resource)
        for member in (f"{name}-1", f"{name}-2"):
            _resolves_to_its_warm_pod(three_nodes, ref, member, within=60)
    finally:
        # No operator runs here to release its finalizer: the cluster goes with its pods.
        etcd_nodes.kubectl(
            "patch", "etcdcluster", name, "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
        )
        etcd_nodes.kubectl("delete", "etcdcluster", name, "-n", ns, "--wait=false")


def _resolves_to_its_warm_pod(nodes: Nodes, ref: ClusterRef, member: str, *, within: float) -> None:
    ns = ref.namespace
    address = until(
        lambda: _pod_ip(nodes, ns, member), within=within, what=f"the warm pod of {member} has an address"
    )
    record = f"{member}.{m.peer_service_name(ref)}.{ns}.svc.cluster.local"
    answer = until(
        lambda: dns_query(record),
        accept=lambda a: a.rcode == NOERROR,
        within=within,
        what=f"{record} resolves",
    )
    assert answer.address == address
    pod = json.loads(nodes.kubectl("get", "pod", member, "-n", ns, "-o", "json").stdout)
    assert warm.is_warm(pod), f"{member} is not a warm pod: its member was never added"


def _pod_ip(nodes: Nodes, ns: str, pod: str) -> str | None:
    out = nodes.kubectl("get", "pod", pod, "-n", ns, "-o", "jsonpath={.status.podIP}", check=False)
    return out.stdout.strip() or None if out.returncode == 0 else None

"""Fixtures for the multi-node tier: three real nodes (tests/harness/nodes.py), started once for
these tests and torn down afterwards, leaving nothing behind (checked on the way out). It needs
root and the node's components (``make node``): missing, the tests skip, or fail under CI=true.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import images, netpol
from tests.harness.cluster import Cluster
from tests.harness.components import MissingComponent, missing, require
from tests.harness.formation import run_operator
from tests.harness.nodes import HOST_IP, ROOT, Nodes, leftovers, open_nodes


# Package scope: the nodes stop once this tier is done, not at the end of the whole run.
@pytest.fixture(scope="package")
def three_nodes() -> Iterator[Nodes]:
    if os.geteuid() != 0:
        missing("the built-in nodes need root (network namespaces, containerd, cgroups)")
    with contextlib.ExitStack() as stack:
        try:
            nodes = stack.enter_context(open_nodes(3, policy_engine=_policy_engine()))
        except MissingComponent as exc:
            missing(str(exc))
        print(f"\nthree nodes Ready in {nodes.start_seconds:.1f}s")
        nodes.import_image(
            require("busybox image for the three nodes", lambda: images.busybox_archive(ROOT / "images"))
        )
        yield nodes
    # After the nodes are gone: the harness's own promise, checked every run.
    assert leftovers() == [], "the three-node harness left things behind"


def _policy_engine() -> Path | None:
    """kube-router when built (`make netpol`): every test of the tier runs with NetworkPolicies
    enforced; without it they run as before, and the enforcement test skips (fails under CI)."""
    try:
        return netpol.kube_router_binary()
    except MissingComponent:
        return None


@pytest.fixture(scope="module")
def nodes_namespace(three_nodes: Nodes) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    three_nodes.kubectl("create", "namespace", name)
    yield name
    three_nodes.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="package")
def etcd_nodes(three_nodes: Nodes) -> Cluster:
    """The three nodes as the e2e tier's Cluster, with the etcd and operator images on every node.
    Their archives are looked up under names of their own: require() keeps one answer per name
    for the session, and the e2e tier's archives live under the one-node ROOT, removed with it."""
    archive, version = require("etcd image for the three nodes", lambda: images.etcd_archive(ROOT / "images"))
    three_nodes.import_image(archive)
    three_nodes.import_image(
        require("operator image for the three nodes", lambda: images.operator_archive(ROOT / "images"))
    )
    return Cluster(three_nodes.kubeconfig, version, three_nodes)


@pytest.fixture
def nodes_operator(three_nodes: Nodes, etcd_nodes: Cluster, nodes_namespace: str) -> Iterator[Path]:
    """The operator on this host watching the module's namespace, making warm and snapshot pods
    with its image as in a cluster; yields its log (kept with the nodes' logs). The volumes of
    the members it replaces are recycled meanwhile."""
    log = ROOT / "logs" / f"operator-{nodes_namespace}.log"
    with (
        three_nodes.recycling(),
        run_operator(
            etcd_nodes,
            nodes_namespace,
            ROOT / "operator",
            log,
            helper_image=images.OPERATOR_IMAGE,
            # It runs on this host, outside the cluster: the clusters' NetworkPolicies admit
            # it (and the tests' own clients here) by this host's address on the nodes' bridge.
            operator_cidrs=(HOST_IP,),
        ),
    ):
        yield log
    lines = log.read_text(errors="replace").splitlines(True)
    steps = [ln for ln in lines if "actors.cluster:" in ln or "supervisor.kube.status:" in ln]
    print(f"operator steps and Events (last 60):\n{''.join(steps[-60:])}")

"""The built-in node (or the three-node tier) with the operator running against it, for the
benches that form clusters on real pods (bench_formation.py, bench_formation_tail.py on one node;
bench_nodes.py, bench_day2.py on three).

Imports the etcd image of the default version and, for warm member pods, the operator's image
(as an in-cluster operator knows its own), then runs `etcd-supervisor run` on this host
watching every namespace. Yields None, after saying why, on a machine that cannot run the node:
a bench skipped is printed as such, never as figures.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TypeVar

from tests.harness import images
from tests.harness import nodes as three
from tests.harness.cluster import Cluster
from tests.harness.components import MissingComponent
from tests.harness.formation import run_operator
from tests.harness.node import ROOT, open_node

T = TypeVar("T")


def _opened(
    stack: contextlib.ExitStack[bool | None],
    bench: str,
    opener: Callable[[], contextlib.AbstractContextManager[T]],
    without_root: str,
    built: str,
) -> T | None:
    """`opener()` entered on `stack`; None, after saying why `bench` is skipped, on a machine
    that cannot run it (no root, or a component `make setup` builds is missing)."""
    if os.geteuid() != 0:
        print(f"{bench}: skipped, {without_root}")
        return None
    try:
        return stack.enter_context(opener())
    except MissingComponent as exc:
        print(f"{bench}: skipped, {exc} (make setup builds {built})")
        return None


@contextlib.contextmanager
def operator_on_node(bench: str, log_name: str, *, warm_pods: bool = True) -> Iterator[Cluster | None]:
    """The node's cluster, with the operator's log at ROOT/logs/`log_name`; None when skipped."""
    with contextlib.ExitStack() as stack:
        node = _opened(stack, bench, open_node, "the built-in node needs root", "the node")
        if node is None:
            yield None
            return
        archive, version = images.etcd_archive(ROOT / "images")
        node.import_image(archive)
        helper = None
        if warm_pods:
            node.import_image(images.operator_archive(ROOT / "images"))
            helper = images.OPERATOR_IMAGE
        cluster = Cluster(node.kubeconfig, version, node)
        with run_operator(cluster, None, ROOT / "operator", ROOT / "logs" / log_name, helper_image=helper):
            yield cluster


@contextlib.contextmanager
def operator_on_nodes(bench: str, log_name: str) -> Iterator[tuple[three.Nodes, Cluster] | None]:
    """The three nodes and their cluster, the operator's log at the nodes' ROOT/logs/`log_name`
    (kept with the nodes' logs), released volumes recycled meanwhile (the operator deletes the
    claim of every member it replaces, and each node has only so many); None when skipped."""
    with contextlib.ExitStack() as stack:
        nodes = _opened(stack, bench, three.open_nodes, "the built-in nodes need root", "the nodes")
        if nodes is None:
            yield None
            return
        archive, version = images.etcd_archive(three.ROOT / "images")
        nodes.import_image(archive)
        nodes.import_image(images.operator_archive(three.ROOT / "images"))
        cluster = Cluster(nodes.kubeconfig, version, nodes)
        stack.enter_context(nodes.recycling())
        log = three.ROOT / "logs" / log_name
        with run_operator(cluster, None, three.ROOT / "operator", log, helper_image=images.OPERATOR_IMAGE):
            yield nodes, cluster


@contextlib.contextmanager
def namespace(cluster: Cluster, prefix: str) -> Iterator[str]:
    """A namespace of its own for one measure, deleted (with what it holds) afterwards."""
    ns = cluster.create_namespace(prefix)
    yield ns
    cluster.kubectl("delete", "namespace", ns, "--timeout=180s")

"""The built-in node with the operator running against it, for the benches that form clusters
on real pods (bench_formation.py, bench_formation_tail.py).

Imports the etcd image of the default version and, for warm member pods, the operator's image
(as an in-cluster operator knows its own), then runs `etcd-supervisor run` on this host
watching every namespace. Yields None, after saying why, on a machine that cannot run the node:
a bench skipped is printed as such, never as figures.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from tests.harness import images
from tests.harness.cluster import Cluster
from tests.harness.components import MissingComponent
from tests.harness.formation import run_operator
from tests.harness.node import ROOT, open_node


@contextlib.contextmanager
def operator_on_node(bench: str, log_name: str, *, warm_pods: bool = True) -> Iterator[Cluster | None]:
    """The node's cluster, with the operator's log at ROOT/logs/`log_name`; None when skipped."""
    if os.geteuid() != 0:
        print(f"{bench}: skipped, the built-in node needs root")
        yield None
        return
    with contextlib.ExitStack() as stack:
        try:
            node = stack.enter_context(open_node())
        except MissingComponent as exc:
            print(f"{bench}: skipped, {exc} (make setup builds the node)")
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

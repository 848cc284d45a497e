"""spec.podTemplate steering members on three real nodes with the real scheduler: a nodeSelector
keeps them off the node without the label, a toleration lets them onto a tainted node, and the
pods the operator makes carry both (issue 29's placement test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import members_on_nodes as on
from tests.harness.cluster import Cluster
from tests.harness.formation import etcd_cluster, wait_for

pytestmark = pytest.mark.slow

POOL = "etcd-supervisor.test/pool"
TAINT = "etcd-supervisor.test/dedicated"


def test_a_node_selector_and_a_toleration_place_members_where_asked(
    etcd_nodes: Cluster, nodes_namespace: str, nodes_operator: Path
) -> None:
    ns, name, cluster = nodes_namespace, "placed", etcd_nodes
    first, tainted, excluded = sorted(on.node_zones(cluster))
    taint = f"{TAINT}=etcd:NoSchedule"
    try:
        cluster.kubectl("label", "node", first, tainted, f"{POOL}=etcd", "--overwrite")
        cluster.kubectl("taint", "node", tainted, taint, "--overwrite")
        resource = etcd_cluster(name, cluster.etcd_version, tls=True)
        resource["spec"]["podTemplate"] = {
            "spec": {
                "nodeSelector": {POOL: "etcd"},
                "tolerations": [{"key": TAINT, "operator": "Equal", "value": "etcd", "effect": "NoSchedule"}],
            }
        }
        cluster.apply([resource], namespace=ns)
        wait_for(f"{name} at three voters", lambda: on.at_full_size(cluster, ns, name, 3), 240, poll=1.0)
        where = on.placement(cluster, ns, name)
        assert set(where.values()) == {first, tainted}, f"members not on the labelled nodes: {where}"
        for pod in on.live_members(cluster, ns, name):
            assert pod["spec"]["nodeSelector"] == {POOL: "etcd"}
            assert {"key": TAINT, "operator": "Equal", "value": "etcd", "effect": "NoSchedule"} in pod[
                "spec"
            ]["tolerations"]
    finally:
        cluster.kubectl("label", "node", first, tainted, f"{POOL}-", check=False)
        cluster.kubectl("taint", "node", tainted, f"{TAINT}-", check=False)
    assert excluded not in where.values()

"""A storage class change on three real nodes, under a recorded client workload whose history must
be linearizable (issue 29): every member is replaced, one at a time, by a new member on a volume
of the new class; the cluster never drops below a serving majority."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness import members_on_nodes as on
from tests.harness.cluster import Cluster
from tests.harness.formation import form_cluster, wait_for
from tests.harness.nodes import Nodes

pytestmark = pytest.mark.slow

NEW_CLASS = "local-second"


def test_a_storage_class_change_moves_every_member_to_the_new_class_under_load(
    three_nodes: Nodes, etcd_nodes: Cluster, nodes_namespace: str, nodes_operator: Path, tmp_path: Path
) -> None:
    ns, name, cluster = nodes_namespace, "moved", etcd_nodes
    three_nodes.add_storage_class(NEW_CLASS, per_node=2, first=100)
    form_cluster(cluster, ns, name, tls=True)
    before = on.claim_classes(cluster, ns, name)
    assert len(before) == 3 and NEW_CLASS not in before.values(), before

    workload = on.workload_for(cluster, ns, name, tmp_path, max_operations=40_000)
    with on.background(workload):
        on.answers_more(workload, "the workload's first answers")
        patch = json.dumps({"spec": {"storage": {"storageClassName": NEW_CLASS}}})
        cluster.kubectl("patch", "-n", ns, f"etcdcluster/{name}", "--type=merge", "-p", patch)

        def moved() -> bool:
            on.follow(cluster, ns, name, workload)
            now = on.claim_classes(cluster, ns, name)
            return set(now.values()) == {NEW_CLASS} and on.at_full_size(cluster, ns, name, 3)

        wait_for(f"{name} at three voters, all on {NEW_CLASS}", moved, 420, poll=1.0)
        on.answers_more(workload, "the workload's answers after the move")
    after = on.claim_classes(cluster, ns, name)
    assert not set(after) & set(before), (before, after)  # new members, not the old ones remounted
    on.assert_linearizable(workload, tmp_path / "history")

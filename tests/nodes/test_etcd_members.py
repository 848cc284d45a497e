"""The operator's etcd cluster on three real nodes, under a recorded client workload whose
history must be linearizable: members spread over nodes and zones, every node drained in turn,
a node lost and returned.

Volumes are node-local (tests/harness/nodes.py), as on bare metal: a member whose node is
drained or lost cannot come back on its volume, so the operator replaces it with a new member
on another node, one at a time; the disruption budget keeps a drain from taking a second
member meanwhile.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.harness import members_on_nodes as on
from tests.harness.cluster import Cluster
from tests.harness.formation import etcd_cluster, form_cluster, wait_for
from tests.harness.nodes import Nodes

pytestmark = pytest.mark.slow


def _form_quick_to_judge(cluster: Cluster, ns: str, name: str) -> None:
    """A 3-member TLS cluster judging silent members after 10 s (default 30 s): the tests wait less."""
    resource = etcd_cluster(name, cluster.etcd_version, tls=True)
    resource["spec"]["health"] = {"unresponsiveAfter": "10s"}
    cluster.apply([resource], namespace=ns)
    wait_for(f"{name} at three voters", lambda: on.at_full_size(cluster, ns, name, 3), 180, poll=1.0)
    on.assert_one_per_node(cluster, ns, name)


def test_members_spread_over_zones_and_every_node_drains_in_turn_under_load(
    etcd_nodes: Cluster, nodes_namespace: str, nodes_operator: Path, tmp_path: Path
) -> None:
    ns, name, cluster = nodes_namespace, "drained", etcd_nodes
    form_cluster(cluster, ns, name, tls=True)
    zones = on.node_zones(cluster)
    where = on.assert_one_per_node(cluster, ns, name)
    assert {zones[n] for n in where.values()} == {"a", "b", "c"}, f"members share a zone: {where}"

    workload = on.workload_for(cluster, ns, name, tmp_path, max_operations=40_000)
    with on.background(workload):
        on.answers_more(workload, "the workload's first answers")
        drains = on.drain_each(cluster, ns, name, workload)
        on.answers_more(workload, "the workload's answers after the last drain")
    assert [d.node for d in drains] == sorted(zones)
    on.assert_linearizable(workload, tmp_path / "history")
    on.remove_cluster(cluster, ns, name)


def test_a_lost_nodes_member_is_replaced_elsewhere_and_nothing_is_doubled_when_it_returns(
    etcd_nodes: Cluster, three_nodes: Nodes, nodes_namespace: str, nodes_operator: Path, tmp_path: Path
) -> None:
    ns, name, cluster = nodes_namespace, "lost", etcd_nodes
    _form_quick_to_judge(cluster, ns, name)

    workload = on.workload_for(cluster, ns, name, tmp_path, max_operations=30_000)
    with on.background(workload):
        on.answers_more(workload, "the workload's first answers")
        lost = on.lose_node(three_nodes, cluster, ns, name, workload)
        # The old member's process thaws on the returned node: it is no member any more and its
        # pod object is gone, so its kubelet stops it; nothing comes back twice.
        until_stable = time.monotonic() + 20
        while time.monotonic() < until_stable:
            assert on.at_full_size(cluster, ns, name, 3), on.placement(cluster, ns, name)
            time.sleep(2)
        on.answers_more(workload, "answers after the node returned")
    # The stale pod was deleted without its node's word only after its member left etcd
    # (RemoveMember removes it from etcd, then deletes its pod; its decision is logged first).
    log = nodes_operator.read_text(errors="replace")
    forced = log.find(f"force-deleting pod {lost.member} ")
    removed = log.find("RemoveMember(member_id=")
    assert f"removed member {lost.member} " in log, f"{lost.member} was never removed from etcd"
    assert forced == -1 or -1 < removed < forced, "a stale pod was force-deleted before its removal"
    on.assert_linearizable(workload, tmp_path / "history")
    on.remove_cluster(cluster, ns, name)


def _acted_on(log: str, member: str) -> list[str]:
    """The operator's steps that restarted or removed `member`, as its log shows them."""
    return [
        line
        for line in log.splitlines()
        if ("RestartMember(" in line or "RemoveMember(" in line) and f"name='{member}'" in line
    ]


def test_partitions_keep_one_serving_majority_and_a_member_the_operator_reaches_is_kept(
    etcd_nodes: Cluster, three_nodes: Nodes, nodes_namespace: str, nodes_operator: Path, tmp_path: Path
) -> None:
    ns, name, cluster = nodes_namespace, "cut", etcd_nodes
    _form_quick_to_judge(cluster, ns, name)
    first, second = sorted(on.placement(cluster, ns, name))[:2]

    workload = on.workload_for(cluster, ns, name, tmp_path, max_operations=30_000)
    with on.background(workload):
        on.answers_more(workload, "the workload's first answers")
        # 1. A member cut off its peers only: the majority elects (or keeps) a leader and
        # serves; the operator still reaches the member, which answers its probes, so for
        # well past unresponsiveAfter it is neither restarted nor replaced.
        node = on.placement(cluster, ns, name)[first]
        seen = len(nodes_operator.read_text(errors="replace"))
        three_nodes.partition(node, peers_only=True)
        try:
            on.answers_more(workload, f"the majority serving while {node} is cut off its peers")
            time.sleep(25)  # 2.5 x unresponsiveAfter: what must not happen would have by now
            on.answers_more(workload, f"the majority still serving while {node} is cut off")
        finally:
            three_nodes.heal(node)
        acted = _acted_on(nodes_operator.read_text(errors="replace")[seen:], first)
        assert not acted, f"{first}, reachable by the operator, was acted on: {acted}"
        wait_for(f"{first} back among three voters", lambda: on.at_full_size(cluster, ns, name, 3), 120)
        assert first in on.placement(cluster, ns, name)

        # 2. A whole minority node cut off while its member runs on: replaced on the other
        # nodes; healed, its old process (out of the membership, its pod deleted) never
        # comes back as a second member.
        cut = on.lose_node(three_nodes, cluster, ns, name, workload, member=second, cut_off=True)
        until_stable = time.monotonic() + 20
        while time.monotonic() < until_stable:
            assert on.at_full_size(cluster, ns, name, 3), on.placement(cluster, ns, name)
            time.sleep(2)
        on.answers_more(workload, "answers after the partition healed")
    assert cut.member not in on.placement(cluster, ns, name)
    on.assert_linearizable(workload, tmp_path / "history")
    on.remove_cluster(cluster, ns, name)

"""An EtcdCluster on the three-node tier: formation with and without a DNS that caches denials,
a node lost, and every node drained in turn.

Issue 28's measures, each against a reference in the same run:

- formation: `kubectl apply` of a 3-member TLS EtcdCluster -> Running, divided by the operator's
  own member pods started at once (tests/harness/formation.twin_members) -> all Ready, with
  kubeadm's CoreDNS (denials not cached) and with denials cached 5 s (NodeLocal DNSCache's
  default); target <= 1.5x both ways;
- node loss: a member's node stopped (kubelet, containerd gone, pods frozen) -> the cluster back
  at three voters on the other nodes (median of --loss-runs, default unresponsiveAfter 30s);
- drains: `kubectl drain` of each node in turn under a client workload -> total time, and the
  longest stretch without a successful client operation.

Prints medians and writes bench/results/nodes.json. Needs root and the nodes' components
(`make setup`); the operator runs on this host as in tests/nodes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import median_line, write_result
from tests.harness import images
from tests.harness import members_on_nodes as on
from tests.harness.cluster import Cluster
from tests.harness.components import MissingComponent
from tests.harness.formation import form_cluster, run_operator, time_static_cluster, twin_members
from tests.harness.nodes import ROOT, Nodes, open_nodes

TARGET = 1.5
DENIAL_CACHE = 5


@contextlib.contextmanager
def namespace(cluster: Cluster, prefix: str) -> Iterator[str]:
    ns = cluster.create_namespace(prefix)
    yield ns
    cluster.kubectl("delete", "namespace", ns, "--timeout=180s")


def formation(nodes: Nodes, cluster: Cluster, runs: int) -> dict[str, Any]:
    """Per DNS setting: EtcdCluster -> Running and twin pods -> Ready, alternating, and ratios."""
    out: dict[str, Any] = {}
    for cache in (None, DENIAL_CACHE):
        nodes.cache_denials(cache)
        label = "denials cached 5 s" if cache else "kubeadm DNS"
        operator, twins = [], []
        for i in range(runs):
            with namespace(cluster, f"bench-twin-{i}") as ns:
                twins.append(
                    time_static_cluster(cluster, ns, twin_members(ns, cluster.etcd_version, tls=True)).ready
                )
            with namespace(cluster, f"bench-form-{i}") as ns:
                operator.append(form_cluster(cluster, ns, "demo", tls=True)[0])
            print(
                f"  {label}, run {i + 1}: EtcdCluster {operator[-1]:.2f} s, twin pods Ready {twins[-1]:.2f} s"
            )
        ratios = [o / t for o, t in zip(operator, twins, strict=True)]
        key = "denial_cache" if cache else "no_cache"
        out[key] = {"operator_s": operator, "twins_s": twins, "median_of_ratios": statistics.median(ratios)}
        print(median_line(f"EtcdCluster -> Running ({label})", operator))
        print(median_line(f"its pods at once -> Ready ({label})", twins))
        print(f"  ratio ({label}): median {statistics.median(ratios):.2f}x (target <= {TARGET}x)")
    nodes.cache_denials(None)
    return out


def node_loss(nodes: Nodes, cluster: Cluster, runs: int) -> dict[str, Any]:
    seconds = []
    for i in range(runs):
        with namespace(cluster, f"bench-loss-{i}") as ns:
            form_cluster(cluster, ns, "lost", tls=True)
            workload = on.workload_for(
                cluster, ns, "lost", ROOT / "bench" / f"loss-{i}", max_operations=20_000
            )
            with on.background(workload):
                on.answers_more(workload, "the workload's first answers")
                seconds.append(on.lose_node(nodes, cluster, ns, "lost", workload).seconds)
        nodes.recycle_local_volumes()
    print(median_line("node lost -> three voters again", seconds, "(unresponsiveAfter 30s)"))
    return {"seconds": seconds, "median_s": statistics.median(seconds)}


def drains(nodes: Nodes, cluster: Cluster) -> dict[str, Any]:
    with namespace(cluster, "bench-drain") as ns:
        form_cluster(cluster, ns, "drained", tls=True)
        workload = on.workload_for(cluster, ns, "drained", ROOT / "bench" / "drain", max_operations=40_000)
        with on.background(workload):
            on.answers_more(workload, "the workload's first answers")
            each = on.drain_each(cluster, ns, "drained", workload)
            on.answers_more(workload, "answers after the last drain")
    nodes.recycle_local_volumes()
    total = sum(d.back_seconds for d in each)
    gap = on.Gaps(workload).measure()
    print(f"  three drains in turn: {total:.1f} s in all; longest gap without a client answer {gap:.2f} s")
    return {"each": [vars_of(d) for d in each], "total_s": total, "longest_gap_s": gap}


def vars_of(drained: on.Drained) -> dict[str, Any]:
    return {"node": drained.node, "drain_s": drained.drain_seconds, "back_s": drained.back_seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="formation runs per DNS setting")
    parser.add_argument("--loss-runs", type=int, default=5)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_nodes: skipped, the built-in nodes need root")
        return
    with contextlib.ExitStack() as stack:
        try:
            nodes = stack.enter_context(open_nodes(3))
        except MissingComponent as exc:
            print(f"bench_nodes: skipped, {exc} (make setup builds the nodes)")
            return
        archive, version = images.etcd_archive(ROOT / "images")
        nodes.import_image(archive)
        nodes.import_image(images.operator_archive(ROOT / "images"))
        cluster = Cluster(nodes.kubeconfig, version, nodes)
        log = ROOT / "logs" / "operator-bench.log"
        with run_operator(cluster, None, ROOT / "operator", log, helper_image=images.OPERATOR_IMAGE):
            result: dict[str, Any] = {"etcd_version": version, "target": TARGET}
            result["formation"] = formation(nodes, cluster, args.runs)
            result["node_loss"] = node_loss(nodes, cluster, args.loss_runs)
            result["drains"] = drains(nodes, cluster)
    print(f"(machine: {os.cpu_count()} cores, shared and noisy: compare the ratios, not the seconds)")
    write_result("nodes", result)


if __name__ == "__main__":
    main()

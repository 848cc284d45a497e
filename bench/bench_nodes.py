"""An EtcdCluster on the three-node tier: formation with and without a DNS that caches denials,
a node lost, and every node drained in turn.

Issue 28's measures, each against a reference in the same run:

- formation: `kubectl apply` of a 3-member TLS EtcdCluster -> Running, with kubeadm's CoreDNS
  (denials not cached) and with denials cached 5 s (NodeLocal DNSCache's default), each divided
  by the same run's reference: the operator's own member pods started at once
  (tests/harness/formation.twin_members) -> all Ready, timed with kubeadm's DNS (under a denial
  cache the reference itself never forms: see formation()); target <= 1.5x both ways;
- a member added (scale 3 -> 4: no pod made ahead for it, as for a replacement) to a cluster
  with a history (HISTORY writes: the new member is sent a snapshot) -> Running with four
  healthy voters, with kubeadm's CoreDNS and with denials cached, and the ratio of the medians:
  a new member's name must resolve when etcd's leader first looks it up (target <= 1.5x; an
  etcd stall of ~30 s that the README describes makes single runs bimodal);
- node loss: a member's node stopped (kubelet, containerd gone, pods frozen) -> the cluster back
  at three voters on the other nodes (median of --loss-runs, default unresponsiveAfter 30s);
- drains: `kubectl drain` of each node in turn under a client workload -> total time, and the
  longest stretch without a successful client operation.

Prints medians and writes bench/results/nodes.json. Needs root and the nodes' components
(`make setup`); the operator runs on this host as in tests/nodes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio

from bench.node_operator import namespace, operator_on_nodes
from bench.report import median_line, write_result
from supervisor.aio import open_asyncio_loop
from tests.harness import members_on_nodes as on
from tests.harness.cluster import Cluster
from tests.harness.formation import form_cluster, time_static_cluster, twin_members
from tests.harness.history import write_past_snapshots
from tests.harness.nodes import ROOT, Nodes
from tests.harness.watch import KubectlWatch

TARGET = 1.5
DENIAL_CACHE = 5
# Writes before a member is added: past etcd's snapshot count (10000 by default in 3.6), so its
# log no longer starts at the beginning and a new member is sent a snapshot, as on any cluster
# that has been serving for a while.
HISTORY = 12_000
WRITERS = 32


def formation(nodes: Nodes, cluster: Cluster, runs: int) -> dict[str, Any]:
    """Per run: the twin pods -> Ready (kubeadm's DNS), then the EtcdCluster -> Running with
    kubeadm's DNS and with denials cached; each EtcdCluster time over that run's twin time.

    The twins are timed with kubeadm's DNS only: started at once, each etcd resolves its peers'
    names before their pods have addresses, and with denials cached it exits on the cached
    NXDOMAIN (their pods, like members', are not restarted by the kubelet), so no reference
    exists under that DNS. The question there is whether the operator's formation pays for it."""
    twins: list[float] = []
    operator: dict[str, list[float]] = {"no_cache": [], "denial_cache": []}
    for i in range(runs):
        with namespace(cluster, f"bench-twin-{i}") as ns:
            twins.append(time_twins(cluster, ns))
        for key, cache in (("no_cache", None), ("denial_cache", DENIAL_CACHE)):
            nodes.cache_denials(cache)
            with namespace(cluster, f"bench-form-{i}") as ns:
                operator[key].append(form_cluster(cluster, ns, "demo", tls=True)[0])
        nodes.cache_denials(None)
        print(
            f"  run {i + 1}: twin pods Ready {twins[-1]:.2f} s; EtcdCluster with kubeadm DNS "
            f"{operator['no_cache'][-1]:.2f} s, with denials cached {operator['denial_cache'][-1]:.2f} s"
        )
    out: dict[str, Any] = {"twins_s": twins}
    print(median_line("its pods at once -> Ready (kubeadm DNS)", twins))
    for key, label in (("no_cache", "kubeadm DNS"), ("denial_cache", f"denials cached {DENIAL_CACHE} s")):
        ratios = [o / t for o, t in zip(operator[key], twins, strict=True)]
        out[key] = {"operator_s": operator[key], "median_of_ratios": statistics.median(ratios)}
        print(median_line(f"EtcdCluster -> Running ({label})", operator[key]))
        print(f"  ratio ({label}): median {statistics.median(ratios):.2f}x (target <= {TARGET}x)")
    return out


def member_added(nodes: Nodes, cluster: Cluster, runs: int) -> dict[str, Any]:
    """Per run and DNS setting: a 3-member TLS cluster formed, given HISTORY writes (the log
    compacted past its start, so the new member is sent a snapshot, over a connection etcd's
    leader dials to the new member's name), then `size: 4` -> Running with four ready voters;
    the ratio of the two settings' medians."""
    added: dict[str, list[float]] = {"no_cache": [], "denial_cache": []}
    for i in range(runs):
        for key, cache in (("no_cache", None), ("denial_cache", DENIAL_CACHE)):
            nodes.cache_denials(cache)
            with namespace(cluster, f"bench-add-{i}") as ns:
                form_cluster(cluster, ns, "grown", tls=True)
                write_history(cluster, ns, "grown", ROOT / "bench" / f"add-{i}")
                added[key].append(time_scale_up(cluster, ns, "grown", 4))
        nodes.cache_denials(None)
        print(
            f"  run {i + 1}: 4th member added with kubeadm DNS {added['no_cache'][-1]:.2f} s, "
            f"with denials cached {added['denial_cache'][-1]:.2f} s"
        )
    ratio = statistics.median(added["denial_cache"]) / statistics.median(added["no_cache"])
    print(median_line("size 3 -> 4 -> Running (kubeadm DNS)", added["no_cache"]))
    print(median_line(f"size 3 -> 4 -> Running (denials cached {DENIAL_CACHE} s)", added["denial_cache"]))
    print(f"  ratio (denials cached / kubeadm DNS): {ratio:.2f}x (target <= {TARGET}x)")
    return {**{k: {"seconds": v, "median_s": statistics.median(v)} for k, v in added.items()}, "ratio": ratio}


def write_history(cluster: Cluster, ns: str, name: str, work: Path) -> None:
    """HISTORY puts, WRITERS at a time, from this host to the members' pod addresses."""
    urls, tls = on.endpoints(cluster, ns, name), on.client_tls(cluster, ns, name, work / "tls")

    async def in_loop() -> None:
        async with open_asyncio_loop():  # grpclib runs on asyncio, bridged by trio-asyncio
            await write_past_snapshots(urls, tls, HISTORY, WRITERS)

    trio.run(in_loop)


def time_scale_up(cluster: Cluster, ns: str, name: str, size: int) -> float:
    """`spec.size` patched -> the API server shows the cluster Running with `size` ready voters."""
    args = ["etcdclusters", "-n", ns, f"--field-selector=metadata.name={name}"]
    with KubectlWatch(cluster.kubeconfig, args, "{.status.phase} {.status.readyReplicas}{'\\n'}") as seen:
        start = time.monotonic()
        cluster.kubectl(
            "patch", "etcdcluster", name, "-n", ns, "--type=merge", "-p", f'{{"spec":{{"size":{size}}}}}'
        )
        return (
            seen.until(f"{name} Running at {size}", lambda lines: lines[-1] == f"Running {size}", 180) - start
        )


def time_twins(cluster: Cluster, ns: str) -> float:
    """The twin pods -> all Ready, their Secret, Service and claims made first: on these nodes a
    pod applied together with its Secret sometimes waited minutes for the kubelet's node
    authorizer to let it read the Secret, which would time Kubernetes, not etcd."""
    objects = twin_members(ns, cluster.etcd_version, tls=True)
    cluster.apply([o for o in objects if o["kind"] != "Pod"], namespace=ns)
    return time_static_cluster(cluster, ns, [o for o in objects if o["kind"] == "Pod"]).ready


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
    parser.add_argument("--only", choices=["formation", "added", "loss", "drains"], help="one measure alone")
    args = parser.parse_args()
    with operator_on_nodes("bench_nodes", "operator-bench.log") as ready:
        if ready is None:
            return
        nodes, cluster = ready
        result: dict[str, Any] = {"etcd_version": cluster.etcd_version, "target": TARGET}
        if args.only in (None, "formation"):
            result["formation"] = formation(nodes, cluster, args.runs)
        if args.only in (None, "added"):
            result["member_added"] = member_added(nodes, cluster, args.runs)
        if args.only in (None, "loss"):
            result["node_loss"] = node_loss(nodes, cluster, args.loss_runs)
        if args.only in (None, "drains"):
            result["drains"] = drains(nodes, cluster)
    print(f"(machine: {os.cpu_count()} cores, shared and noisy: compare the ratios, not the seconds)")
    write_result("nodes", result)


if __name__ == "__main__":
    main()

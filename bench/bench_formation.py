"""A 3-member TLS EtcdCluster on real pods, against three static etcd pods, on the built-in node.

Issue 16's measure: time from `kubectl apply` of the EtcdCluster to phase Running, divided by
the time from `kubectl apply` of three static etcd pods (same image, same probe, started at
once) to all Ready, in the same run; target <= 1.5x. Samples alternate (static, operator,
static, ...) so that load on the machine falls on both alike; both are timed by watching the
API server (tests/e2e/watch.py). Prints medians and writes bench/results/formation.json.

A second reference from the same static runs: until the three pods form a cluster that serves
(each answers etcd's linearizable /health: a leader, a quorum read). Their readiness probe, as
our members', passes without a leader, so "all Ready" is reached before the static pods are a
cluster; Running means the EtcdCluster's members all answer with a leader. The second ratio
compares the same end state on both sides; both are printed.

Needs root and the node's components (`make setup` builds them); the operator runs on this
host with the deployed ServiceAccount's rights, as in tests/e2e/test_members.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.cluster import Cluster
from tests.e2e.formation import (
    StaticTimes,
    assert_no_member_failed,
    form_cluster,
    run_operator,
    time_static_cluster,
)
from tests.harness import images
from tests.harness.components import MissingComponent
from tests.harness.node import ROOT, open_node

TARGET = 1.5


def sample(cluster: Cluster, index: int) -> tuple[StaticTimes, float]:
    """One static run and one operator run, each in a namespace of its own, deleted after."""
    static_ns = cluster.create_namespace(f"bench-static-{index}")
    static = time_static_cluster(cluster, static_ns)
    operator_ns = cluster.create_namespace(f"bench-operator-{index}")
    operator, seen = form_cluster(cluster, operator_ns, "demo", tls=True)
    assert_no_member_failed(seen)
    # Gone before the next sample, so that no teardown competes with the next timing.
    cluster.kubectl("delete", "namespace", static_ns, operator_ns, "--timeout=180s")
    return static, operator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--no-warm-pods",
        action="store_true",
        help="run the operator without its image (no warm member pods), as from a laptop",
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_formation: skipped, the built-in node needs root")
        return
    try:
        node_context = open_node()
        node = node_context.__enter__()
    except MissingComponent as exc:
        print(f"bench_formation: skipped, {exc} (make setup builds the node)")
        return
    try:
        archive, version = images.etcd_archive(ROOT / "images")
        node.import_image(archive)
        helper = None
        if not args.no_warm_pods:  # in-cluster, the operator knows its own image
            node.import_image(images.operator_archive(ROOT / "images"))
            helper = images.OPERATOR_IMAGE
        cluster = Cluster(node.kubeconfig, version, node)
        statics, servings, operators = [], [], []
        log = ROOT / "logs" / "operator-bench.log"
        with run_operator(cluster, None, ROOT / "operator", log, helper_image=helper):
            for i in range(args.runs):
                static, operator = sample(cluster, i)
                print(
                    f"  run {i + 1}: static Ready {static.ready:.2f} s, serving {static.serving:.2f} s; "
                    f"EtcdCluster {operator:.2f} s = {operator / static.ready:.2f}x Ready, "
                    f"{operator / static.serving:.2f}x serving"
                )
                statics.append(static.ready)
                servings.append(static.serving)
                operators.append(operator)
    finally:
        node_context.__exit__(None, None, None)

    ratios = [o / s for s, o in zip(statics, operators, strict=True)]
    serving_ratios = [o / s for s, o in zip(servings, operators, strict=True)]
    result = {
        "runs": args.runs,
        "warm_pods": not args.no_warm_pods,
        "etcd_version": version,
        "static_s": statics,
        "static_serving_s": servings,
        "operator_tls_s": operators,
        "median_static_s": statistics.median(statics),
        "median_static_serving_s": statistics.median(servings),
        "median_operator_tls_s": statistics.median(operators),
        "ratio_of_medians": statistics.median(operators) / statistics.median(statics),
        "median_of_ratios": statistics.median(ratios),
        "ratio_of_medians_to_serving": statistics.median(operators) / statistics.median(servings),
        "median_of_ratios_to_serving": statistics.median(serving_ratios),
        "target": TARGET,
    }
    print(f"formation on the built-in node, etcd {version}, {args.runs} alternating runs")
    print(f"  (machine: {os.cpu_count()} cores, shared and noisy: compare the ratio, not the seconds)")
    print(f"  three static pods -> all Ready    median {result['median_static_s']:.2f} s")
    print(f"  three static pods -> serving      median {result['median_static_serving_s']:.2f} s")
    print(f"  EtcdCluster (TLS) -> Running      median {result['median_operator_tls_s']:.2f} s")
    print(
        f"  ratio of medians {result['ratio_of_medians']:.2f}x, median of per-run ratios "
        f"{result['median_of_ratios']:.2f}x; target <= {TARGET}x"
    )
    print(
        f"  against the static cluster serving: ratio of medians "
        f"{result['ratio_of_medians_to_serving']:.2f}x, median of per-run ratios "
        f"{result['median_of_ratios_to_serving']:.2f}x"
    )
    out = Path(__file__).parent / "results" / "formation.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

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

And a 3-member EtcdCluster with TLS off, against the same static pods. The static pods have no
TLS, so they mount no Secret; a TLS member pod does, and the kubelet's first read of a new
Secret is sometimes refused by the node authorizer (it has not yet seen the pod bound to the
node) and retried about a second later. That cost is Kubernetes', paid by any pod with a Secret:
the plain cluster is the like-for-like comparison, the TLS one the default's.

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

import attrs

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


@attrs.frozen
class Sample:
    static: StaticTimes
    tls: float  # apply -> Running, the default EtcdCluster (TLS)
    plain: float  # apply -> Running, TLS off


def sample(cluster: Cluster, index: int) -> Sample:
    """One static run and two operator runs, each in a namespace of its own, deleted after."""
    static_ns = cluster.create_namespace(f"bench-static-{index}")
    static = time_static_cluster(cluster, static_ns)
    times = {}
    for tls in (True, False):
        namespace = cluster.create_namespace(f"bench-operator-{'tls' if tls else 'plain'}-{index}")
        times[tls], seen = form_cluster(cluster, namespace, "demo", tls=tls)
        assert_no_member_failed(seen)
        # Gone before the next timing, so that no teardown competes with it.
        cluster.kubectl("delete", "namespace", namespace, "--timeout=180s")
    cluster.kubectl("delete", "namespace", static_ns, "--timeout=180s")
    return Sample(static, tls=times[True], plain=times[False])


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
        samples = []
        log = ROOT / "logs" / "operator-bench.log"
        with run_operator(cluster, None, ROOT / "operator", log, helper_image=helper):
            for i in range(args.runs):
                one = sample(cluster, i)
                ready, serving = one.static.ready, one.static.serving
                print(
                    f"  run {i + 1}: static Ready {ready:.2f} s, serving {serving:.2f} s; "
                    f"EtcdCluster TLS {one.tls:.2f} s = {one.tls / ready:.2f}x Ready, "
                    f"{one.tls / serving:.2f}x serving; plain {one.plain:.2f} s = "
                    f"{one.plain / ready:.2f}x Ready"
                )
                samples.append(one)
    finally:
        node_context.__exit__(None, None, None)

    statics = [one.static.ready for one in samples]
    servings = [one.static.serving for one in samples]
    operators = [one.tls for one in samples]
    plains = [one.plain for one in samples]
    ratios = [o / s for s, o in zip(statics, operators, strict=True)]
    serving_ratios = [o / s for s, o in zip(servings, operators, strict=True)]
    plain_ratios = [o / s for s, o in zip(statics, plains, strict=True)]
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
        "operator_plain_s": plains,
        "median_operator_plain_s": statistics.median(plains),
        "plain_ratio_of_medians": statistics.median(plains) / statistics.median(statics),
        "plain_median_of_ratios": statistics.median(plain_ratios),
        "target": TARGET,
    }
    print(f"formation on the built-in node, etcd {version}, {args.runs} alternating runs")
    print(f"  (machine: {os.cpu_count()} cores, shared and noisy: compare the ratio, not the seconds)")
    print(f"  three static pods -> all Ready    median {result['median_static_s']:.2f} s")
    print(f"  three static pods -> serving      median {result['median_static_serving_s']:.2f} s")
    print(f"  EtcdCluster (TLS) -> Running      median {result['median_operator_tls_s']:.2f} s")
    print(f"  EtcdCluster (plain) -> Running    median {result['median_operator_plain_s']:.2f} s")
    print(
        f"  TLS EtcdCluster against the static pods Ready: ratio of medians "
        f"{result['ratio_of_medians']:.2f}x, median of per-run ratios "
        f"{result['median_of_ratios']:.2f}x; target <= {TARGET}x"
    )
    print(
        f"  TLS EtcdCluster against the static cluster serving: ratio of medians "
        f"{result['ratio_of_medians_to_serving']:.2f}x, median of per-run ratios "
        f"{result['median_of_ratios_to_serving']:.2f}x"
    )
    print(
        f"  plain EtcdCluster against the static pods Ready: ratio of medians "
        f"{result['plain_ratio_of_medians']:.2f}x, median of per-run ratios "
        f"{result['plain_median_of_ratios']:.2f}x"
    )
    out = Path(__file__).parent / "results" / "formation.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

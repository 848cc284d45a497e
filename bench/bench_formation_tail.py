"""The tail of formation times: many 3-member EtcdClusters formed one after another on the
built-in node, each in a namespace of its own, with one operator.

bench_formation.py compares medians; this one looks at the slow few. A formation that waits on
a back-off of the kubelet's (a new pod it set aside, supervisor/kube/pod_nudge.py) or on a
learner started again takes several times the median, and a median of nine runs hides it.
Prints the median, the 90th percentile, the slowest, how many took over SLOW_FACTOR times the
median, and writes bench/results/formation_tail.json.

Each namespace is deleted without waiting (its pods take their grace period to go), so the
next formation runs beside a teardown, as on a busy cluster. Needs root and the node's
components (`make setup` builds them).
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
from tests.e2e.formation import form_cluster, run_operator
from tests.harness import images
from tests.harness.components import MissingComponent
from tests.harness.node import ROOT, open_node

SLOW_FACTOR = 2.0


def summary(times: list[float]) -> dict[str, float | int]:
    ordered = sorted(times)
    median = statistics.median(ordered)
    return {
        "runs": len(ordered),
        "median_s": round(median, 2),
        "p90_s": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 2),
        "max_s": round(ordered[-1], 2),
        "slow": sum(t > SLOW_FACTOR * median for t in ordered),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--tls", action="store_true", help="TLS on (default: off, no Secret to wait for)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_formation_tail: skipped, the built-in node needs root")
        return
    try:
        node_context = open_node()
        node = node_context.__enter__()
    except MissingComponent as exc:
        print(f"bench_formation_tail: skipped, {exc} (make setup builds the node)")
        return
    times: list[float] = []
    try:
        archive, version = images.etcd_archive(ROOT / "images")
        node.import_image(archive)
        node.import_image(images.operator_archive(ROOT / "images"))
        cluster = Cluster(node.kubeconfig, version, node)
        log = ROOT / "logs" / "operator-bench-tail.log"
        with run_operator(cluster, None, ROOT / "operator", log, helper_image=images.OPERATOR_IMAGE):
            for i in range(args.runs):
                ns = cluster.create_namespace(f"tail-{i}")
                took, _ = form_cluster(cluster, ns, "demo", tls=args.tls)
                print(f"  run {i + 1}: {took:.2f} s", flush=True)
                times.append(took)
                cluster.kubectl("delete", "namespace", ns, "--wait=false")
    finally:
        node_context.__exit__(None, None, None)
    result = {"tls": args.tls, "etcd_version": version, "slow_factor": SLOW_FACTOR, **summary(times)}
    print(f"formation tail on the built-in node, etcd {version}, TLS {'on' if args.tls else 'off'}")
    print(f"  (machine: {os.cpu_count()} cores, shared and noisy: compare against the median)")
    print(
        f"  {result['runs']} runs: median {result['median_s']} s, p90 {result['p90_s']} s, "
        f"slowest {result['max_s']} s; {result['slow']} over {SLOW_FACTOR}x the median"
    )
    out = Path(__file__).parent / "results" / "formation_tail.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

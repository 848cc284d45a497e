"""The tail of formation times: many 3-member EtcdClusters formed one after another on the
built-in node, each in a namespace of its own, with one operator.

bench_formation.py compares medians; this one looks at the slow few. A formation that waits on
a back-off of the kubelet's (a new pod it set aside, supervisor/kube/pod_nudge.py) or on a
learner started again takes several times the median, and a median of nine runs hides it.
Prints the median, the 90th percentile, the slowest, how many took over SLOW_FACTOR times the
median, and writes bench/results/formation_tail.json.

Each namespace is deleted without waiting (its pods take their grace period to go), so the
next formation runs beside a teardown, as on a busy cluster. A run over SLOW_FACTOR times the
median so far leaves its pods' logs (every container's, and the pods as JSON in pods.log)
under the node's log directory, `slow-<namespace>/`, before its namespace goes: the operator's
log says which step waited, the members' say why. Needs root and the node's components
(`make setup` builds them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.node_operator import operator_on_node
from bench.report import write_result
from tests.harness.cluster import Cluster
from tests.harness.formation import form_cluster
from tests.harness.node import LOGS, ROOT

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


def keep_pod_logs(cluster: Cluster, namespace: str, dest: Path) -> None:
    """Every container's log in `namespace` and its pods as JSON (pods.log) into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    pods = cluster.kubectl("get", "pods", "-n", namespace, "-o", "json", check=False).stdout
    (dest / "pods.log").write_text(pods)  # .log: the node's cleanup keeps only logs
    for pod in json.loads(pods or "{}").get("items", []):
        name = pod["metadata"]["name"]
        out = cluster.kubectl("logs", "-n", namespace, name, "--all-containers", "--prefix", check=False)
        (dest / f"{name}.log").write_text(out.stdout + out.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--tls", action="store_true", help="TLS on (default: off, no Secret to wait for)")
    args = parser.parse_args()
    times: list[float] = []
    with operator_on_node("bench_formation_tail", "operator-bench-tail.log") as cluster:
        if cluster is None:
            return
        version = cluster.etcd_version
        for i in range(args.runs):
            ns = cluster.create_namespace(f"tail-{i}")
            took, _ = form_cluster(cluster, ns, "demo", tls=args.tls)
            print(f"  run {i + 1}: {took:.2f} s", flush=True)
            if len(times) >= 5 and took > SLOW_FACTOR * statistics.median(times):
                keep_pod_logs(cluster, ns, ROOT / "logs" / f"slow-{ns}")
                print(f"    slow: pod logs kept in {LOGS / 'logs' / f'slow-{ns}'}", flush=True)
            times.append(took)
            cluster.kubectl("delete", "namespace", ns, "--wait=false")
    result = {"tls": args.tls, "etcd_version": version, "slow_factor": SLOW_FACTOR, **summary(times)}
    print(f"formation tail on the built-in node, etcd {version}, TLS {'on' if args.tls else 'off'}")
    print(f"  (machine: {os.cpu_count()} cores, shared and noisy: compare against the median)")
    print(
        f"  {result['runs']} runs: median {result['median_s']} s, p90 {result['p90_s']} s, "
        f"slowest {result['max_s']} s; {result['slow']} over {SLOW_FACTOR}x the median"
    )
    write_result("formation_tail", result)


if __name__ == "__main__":
    main()

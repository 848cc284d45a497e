"""A 3-member EtcdCluster on real pods, against three static etcd pods, on the built-in node.

Issue 16's measure: time from `kubectl apply` of the EtcdCluster to phase Running, divided by
the time from `kubectl apply` of three static etcd pods started at once to all Ready, in the
same run; target <= 1.5x. Each sample times every reference and both EtcdClusters (TLS on, the
default, and off) in turn, so that load on the machine falls on all alike; all are timed by
watching the API server (tests/harness/watch.py). Prints medians of per-run ratios (and ratios of
medians) and writes bench/results/formation.json.

The static pods the target is held to are the like-for-like ones: the operator's own member
pods (its manifests: the same image, pod spec, probe, claims, peer Service, and the TLS Secret
when TLS is on; tests/harness/formation.twin_members) started at once with the whole membership, as
someone running etcd by hand would run them. Against these only the orchestration differs: the
staged bootstrap, and the operator's reactions between its steps. A TLS cluster is compared
with TLS pods and a plain one with plain pods (TARGETED).

Printed beside them, as a floor: bare static pods (same image and probe, no Secret, no claim,
no TLS). A TLS member pod mounts a Secret, and the kubelet's first read of a new Secret is
sometimes refused by the node authorizer (it has not yet seen the pod bound to the node) and
retried about a second later; its claim is bound by the volume binder first. Those costs are
Kubernetes', paid by any pod with a Secret and a claim, and the bare pods pay none of them.

Two ends for each reference: all Ready, and serving (each answers etcd's linearizable /health:
a leader, a quorum read). Their readiness probe, as our members', passes without a leader, so
"all Ready" comes before the static pods are a cluster; Running means the EtcdCluster's members
all answer with a leader. The target is held to Ready, the stricter of the two.

Needs root and the node's components (`make setup` builds them); the operator runs on this
host with the deployed ServiceAccount's rights, as in tests/e2e/test_members.py.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.node_operator import operator_on_node
from bench.report import write_result
from tests.harness.cluster import Cluster
from tests.harness.formation import (
    StaticTimes,
    assert_no_member_failed,
    form_cluster,
    time_static_cluster,
    twin_members,
)

TARGET = 1.5


@attrs.frozen
class Sample:
    static: StaticTimes  # the bare static pods: no Secret, no claim
    twin_tls: StaticTimes  # the operator's own TLS member pods, started at once
    twin_plain: StaticTimes  # the same with TLS off
    tls: float  # apply -> Running, the default EtcdCluster (TLS)
    plain: float  # apply -> Running, TLS off


def sample(cluster: Cluster, index: int) -> Sample:
    """Three reference runs and two operator runs, each in a namespace of its own, deleted
    (and gone) before the next timing, so that no teardown and no idle pods compete with it."""

    @contextlib.contextmanager
    def namespace(prefix: str) -> Iterator[str]:
        ns = cluster.create_namespace(f"{prefix}-{index}")
        yield ns
        cluster.kubectl("delete", "namespace", ns, "--timeout=180s")

    with namespace("bench-static") as ns:
        static = time_static_cluster(cluster, ns)
    twins = {}
    times = {}
    for tls in (True, False):
        with namespace(f"bench-twin-{'tls' if tls else 'plain'}") as ns:
            twins[tls] = time_static_cluster(cluster, ns, twin_members(ns, cluster.etcd_version, tls=tls))
    for tls in (True, False):
        with namespace(f"bench-operator-{'tls' if tls else 'plain'}") as ns:
            times[tls], seen = form_cluster(cluster, ns, "demo", tls=tls)
            assert_no_member_failed(seen)
    return Sample(static, twins[True], twins[False], tls=times[True], plain=times[False])


# (key, what is compared, EtcdCluster's time, the reference's time). Against the twins only the
# orchestration differs: the target is held to those (TARGETED); the bare pods are the floor.
COMPARISONS: list[tuple[str, str, Callable[[Sample], float], Callable[[Sample], float]]] = [
    (
        "tls_to_static_ready",
        "TLS EtcdCluster / bare static pods Ready",
        lambda s: s.tls,
        lambda s: s.static.ready,
    ),
    (
        "tls_to_static_serving",
        "TLS EtcdCluster / bare static pods serving",
        lambda s: s.tls,
        lambda s: s.static.serving,
    ),
    (
        "plain_to_static_ready",
        "plain EtcdCluster / bare static pods Ready",
        lambda s: s.plain,
        lambda s: s.static.ready,
    ),
    (
        "tls_to_twin_ready",
        "TLS EtcdCluster / its pods started at once, Ready",
        lambda s: s.tls,
        lambda s: s.twin_tls.ready,
    ),
    (
        "tls_to_twin_serving",
        "TLS EtcdCluster / its pods started at once, serving",
        lambda s: s.tls,
        lambda s: s.twin_tls.serving,
    ),
    (
        "plain_to_twin_ready",
        "plain EtcdCluster / its pods started at once, Ready",
        lambda s: s.plain,
        lambda s: s.twin_plain.ready,
    ),
]
TARGETED = ("tls_to_twin_ready", "plain_to_twin_ready")
TIMES: list[tuple[str, str, Callable[[Sample], float]]] = [
    ("static_ready_s", "bare static pods -> all Ready", lambda s: s.static.ready),
    ("static_serving_s", "bare static pods -> serving", lambda s: s.static.serving),
    ("twin_tls_ready_s", "TLS member pods at once -> all Ready", lambda s: s.twin_tls.ready),
    ("twin_tls_serving_s", "TLS member pods at once -> serving", lambda s: s.twin_tls.serving),
    ("twin_plain_ready_s", "plain member pods at once -> all Ready", lambda s: s.twin_plain.ready),
    ("operator_tls_s", "EtcdCluster (TLS) -> Running", lambda s: s.tls),
    ("operator_plain_s", "EtcdCluster (plain) -> Running", lambda s: s.plain),
]


def report(samples: list[Sample]) -> dict[str, Any]:
    """Per-run times and their medians; per comparison the median of per-run ratios and the
    ratio of medians. Printed, and returned for the JSON."""
    result: dict[str, Any] = {}
    for key, what, of in TIMES:
        values = [of(s) for s in samples]
        result[key] = values
        print(f"  {what:<40} median {statistics.median(values):.2f} s")
    for key, what, num, den in COMPARISONS:
        ratios = [num(s) / den(s) for s in samples]
        of_medians = statistics.median(num(s) for s in samples) / statistics.median(den(s) for s in samples)
        result[key] = {"median_of_ratios": statistics.median(ratios), "ratio_of_medians": of_medians}
        median = statistics.median(ratios)
        print(f"  {what:<52} median of ratios {median:.2f}x, ratio of medians {of_medians:.2f}x")
    met = {key: result[key]["median_of_ratios"] <= TARGET for key in TARGETED}
    result["target_met"] = met
    verdict = ", ".join(f"{key} {'met' if ok else 'NOT met'}" for key, ok in met.items())
    print(f"  target {TARGET}x (median of per-run ratios, like for like): {verdict}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--no-warm-pods",
        action="store_true",
        help="run the operator without its image (no warm member pods), as from a laptop",
    )
    args = parser.parse_args()
    samples: list[Sample] = []
    warm_pods = not args.no_warm_pods
    with operator_on_node("bench_formation", "operator-bench.log", warm_pods=warm_pods) as cluster:
        if cluster is None:
            return
        version = cluster.etcd_version
        for i in range(args.runs):
            one = sample(cluster, i)
            print(
                f"  run {i + 1}: EtcdCluster TLS {one.tls:.2f} s, plain {one.plain:.2f} s; "
                f"static Ready {one.static.ready:.2f} s, serving {one.static.serving:.2f} s; "
                f"twins Ready TLS {one.twin_tls.ready:.2f} s, plain {one.twin_plain.ready:.2f} s"
            )
            samples.append(one)

    print(f"formation on the built-in node, etcd {version}, {args.runs} alternating runs")
    print(f"  (machine: {os.cpu_count()} cores, shared and noisy: compare the ratio, not the seconds)")
    result = {
        "runs": args.runs,
        "warm_pods": not args.no_warm_pods,
        "etcd_version": version,
        "target": TARGET,
    }
    result.update(report(samples))
    write_result("formation", result)


if __name__ == "__main__":
    main()

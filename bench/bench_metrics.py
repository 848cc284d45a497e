"""/metrics of a daemon with 100 clusters: how long a scrape takes, through the real HTTP server.

100 clusters x 3 members (BENCH_CLUSTERS to change) run through the real fleet, actors and
planners on the in-memory stand-ins of bench_fleet.py, wired as the daemon wires them: the
cluster metrics wrap the sinks, each cluster has its metrics child, the runtime reports to
its observer, and hypercorn serves /metrics on loopback. Once every cluster has formed, the
script scrapes /metrics BENCH_SCRAPES times (one connection each, as Prometheus' first scrape)
while the actors keep ticking, and /healthz as many times as the reference: the same server
and connection cost with nothing to render.

Target (issue 14): /metrics answers in under 100 ms. Prints medians, p99 and the ratio to
/healthz, and writes bench/results/metrics.json. Shared machines: read the figures as this run's.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import trio
from prometheus_client import CollectorRegistry, generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_fleet  # the in-memory clusters

from actors.fleet import open_fleet
from actors.model import ClusterRef, ClusterResource, ClusterSpec
from actors.ports import ClusterPorts
from supervisor.gc_policy import tune_for_many_actors
from supervisor.metrics import open_runtime_metrics
from supervisor.metrics.clusters import ClusterMetrics
from supervisor.metrics.http import Endpoints, Readiness, serve_endpoints

CLUSTERS = int(os.environ.get("BENCH_CLUSTERS", "100"))
SCRAPES = int(os.environ.get("BENCH_SCRAPES", "200"))
RESULTS = Path(__file__).resolve().parent / "results"


async def get(port: int, path: str) -> tuple[float, int]:
    """Seconds from connecting to the last byte of the answer, and the body's size."""
    began = time.perf_counter()
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode())
        data = bytearray()
        while chunk := await stream.receive_some(65536):
            data += chunk
    took = time.perf_counter() - began
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:80]
    return took, len(body)


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(1000 * statistics.median(ordered), 2),
        "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
    }


async def run() -> dict[str, object]:
    bench_fleet.CLUSTERS = CLUSTERS  # when its "all formed" event fires
    counters = bench_fleet.Counters()
    refs = [ClusterRef("bench", f"c{i:04d}") for i in range(CLUSTERS)]
    clusters = {ref: bench_fleet.InstantCluster(ref, counters) for ref in refs}
    registry = CollectorRegistry()
    shared = ClusterMetrics(registry, _Fanout(clusters), _Fanout(clusters))

    def ports_for(res: ClusterResource) -> ClusterPorts:
        c = clusters[res.ref]
        return ClusterPorts(c, c, shared, shared)

    async with (
        open_runtime_metrics(registry),
        open_fleet(ports_for, timing=bench_fleet.TIMING, name="bench", children=[shared.child]) as fleet,
        trio.open_nursery() as nursery,
    ):
        endpoints = Endpoints(Readiness(), registry)
        port = await nursery.start(partial(serve_endpoints, 0, endpoints, host="127.0.0.1"))
        await fleet.apply([ClusterResource(ref, ClusterSpec(size=3, tls_enabled=False)) for ref in refs])
        await counters.all_formed.wait()
        await trio.sleep(3 * bench_fleet.TIMING.tick)  # steady ticks, every cluster's Observed published
        if os.environ.get("BENCH_PROFILE"):
            import cProfile
            import pstats

            cProfile.runctx("generate_latest(registry)", globals(), {"registry": registry}, "/tmp/obs-prof")
            pstats.Stats("/tmp/obs-prof").sort_stats("cumulative").print_stats(25)
        render, render_cpu = [], []
        for _ in range(20):
            began, cpu = time.perf_counter(), time.thread_time()
            generate_latest(registry)
            render.append(time.perf_counter() - began)
            render_cpu.append(time.thread_time() - cpu)
        scrapes, health, size = [], [], 0
        for _ in range(SCRAPES):  # alternate, so load changes hit both alike
            took, size = await get(port, "/metrics")
            scrapes.append(took)
            health.append((await get(port, "/healthz"))[0])
        series = sum(1 for line in generate_latest(registry).splitlines() if not line.startswith(b"#"))
        nursery.cancel_scope.cancel()
    metrics_s, health_s = summary(scrapes), summary(health)
    return {
        "clusters": CLUSTERS,
        "members_per_cluster": 3,
        "scrapes": SCRAPES,
        "series": series,
        "body_bytes": size,
        "metrics": metrics_s,
        "healthz_reference": health_s,
        "render_in_process_median_ms": round(1000 * statistics.median(render), 2),
        # CPU time of one render: what a scrape costs when this process is not starved of a core
        # (on a shared machine wall time also counts the other processes' turns).
        "render_cpu_median_ms": round(1000 * statistics.median(render_cpu), 2),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "cpu_cores": os.cpu_count(),
        "ratio_metrics_to_healthz_median": round(metrics_s["median_ms"] / health_s["median_ms"], 1),
    }


class _Fanout:
    """The sinks behind the metrics: each cluster's in-memory stand-in."""

    def __init__(self, clusters: dict[ClusterRef, bench_fleet.InstantCluster]) -> None:
        self._clusters = clusters

    async def publish(self, cluster, status) -> None:  # type: ignore[no-untyped-def]
        await self._clusters[cluster].publish(cluster, status)

    async def record(self, cluster, *, reason, message, warning=False) -> None:  # type: ignore[no-untyped-def]
        await self._clusters[cluster].record(cluster, reason=reason, message=message, warning=warning)


def main() -> None:
    tune_for_many_actors()  # as `etcd-supervisor` does at start
    report = trio.run(run)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "metrics.json").write_text(json.dumps(report, indent=2) + "\n")
    for key, value in report.items():
        print(f"{key:34} {value}")
    print(
        f"/metrics of {CLUSTERS} clusters: median {report['metrics']['median_ms']} ms, "  # type: ignore[index]
        f"p99 {report['metrics']['p99_ms']} ms (target < 100 ms); one render costs"
        f" {report['render_cpu_median_ms']} ms of CPU; load average {report['load_average_1m']}"
        f" on {report['cpu_cores']} cores"
    )


if __name__ == "__main__":
    main()

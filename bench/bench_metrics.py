"""/metrics of a daemon with 100 clusters: how long a scrape takes, through the real HTTP server.

100 clusters x 3 members (BENCH_CLUSTERS to change) run through the real fleet, actors and
planners on the in-memory stand-ins of bench_fleet.py, wired as the daemon wires them: the
cluster metrics wrap the sinks, each cluster has its metrics child, the runtime reports to
its observer, and hypercorn serves /metrics on loopback. Once every cluster has formed, the
script scrapes /metrics BENCH_SCRAPES times (one connection each, as Prometheus' first scrape)
while the actors keep ticking, in turn with two references on the same loop:

- /metrics of a second server, served on the daemon's trio loop and rendering there at every
  scrape: how the daemon answered before the server got a loop and thread of its own
  (supervisor/metrics/server_thread.py) and kept its rendering fresh in a worker thread
  (exposition.py): the "before" of that change;
- /healthz: the same server and connection cost with nothing to render.

Target (issue 14): /metrics answers in under 100 ms. Prints medians, p99 and the ratios, and
writes bench/results/metrics.json. Shared machines: read the figures as this run's.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from prometheus_client import CollectorRegistry, generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.fleet import open_fleet
from actors.model import ClusterRef, ClusterResource, ClusterSpec
from actors.ports import ClusterPorts
from bench import bench_fleet  # the in-memory clusters
from supervisor.gc_policy import tune_for_many_actors
from supervisor.metrics import open_runtime_metrics
from supervisor.metrics.clusters import ClusterMetrics
from supervisor.metrics.exposition import REFRESH_EVERY, Exposition
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
        before = Endpoints(Readiness(), registry)
        before.exposition = RenderEveryScrape(registry)
        before_port = await nursery.start(serve_on_this_loop, before)
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
        scrapes, on_loop, health, size = [], [], [], 0
        renderings = endpoints.exposition.renderings
        began = time.perf_counter()
        for _ in range(SCRAPES):  # in turn, so load changes hit all alike
            took, size = await get(port, "/metrics")
            scrapes.append(took)
            on_loop.append((await get(before_port, "/metrics"))[0])
            health.append((await get(port, "/healthz"))[0])
        renderings = endpoints.exposition.renderings - renderings
        scraping_s = time.perf_counter() - began
        series = sum(1 for line in generate_latest(registry).splitlines() if not line.startswith(b"#"))
        nursery.cancel_scope.cancel()
    metrics_s, on_loop_s, health_s = summary(scrapes), summary(on_loop), summary(health)
    return {
        "clusters": CLUSTERS,
        "members_per_cluster": 3,
        "scrapes": SCRAPES,
        "series": series,
        "body_bytes": size,
        "metrics": metrics_s,
        "before_render_on_loop_each_scrape": on_loop_s,
        "healthz_reference": health_s,
        # Renderings in the worker thread while scraping: one every REFRESH_EVERY s, not one a scrape.
        "renderings_during_scrapes": renderings,
        "scraping_seconds": round(scraping_s, 1),
        "refresh_every_s": REFRESH_EVERY,
        "render_in_process_median_ms": round(1000 * statistics.median(render), 2),
        # CPU time of one render: what a scrape costs when this process is not starved of a core
        # (on a shared machine wall time also counts the other processes' turns).
        "render_cpu_median_ms": round(1000 * statistics.median(render_cpu), 2),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "cpu_cores": os.cpu_count(),
        "ratio_metrics_to_healthz_median": round(metrics_s["median_ms"] / health_s["median_ms"], 1),
        "ratio_before_to_metrics_median": round(on_loop_s["median_ms"] / metrics_s["median_ms"], 1),
        "ratio_before_to_metrics_p99": round(on_loop_s["p99_ms"] / metrics_s["p99_ms"], 1),
    }


class RenderEveryScrape(Exposition):
    """The reference: render on the trio loop at every scrape, as before exposition.py."""

    async def body(self) -> bytes:
        return generate_latest(self._registry)


async def serve_on_this_loop(
    endpoints: Endpoints, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
) -> None:
    """The reference: hypercorn on the daemon's loop, as before server_thread.py."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")  # quiet: no "Running on" line
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(partial(serve, endpoints, config))  # type: ignore[arg-type]
        task_status.started(int(binds[0].rsplit(":", 1)[1]))


class _Fanout:
    """The sinks behind the metrics: each cluster's in-memory stand-in."""

    def __init__(self, clusters: dict[ClusterRef, bench_fleet.InstantCluster]) -> None:
        self._clusters = clusters

    async def publish(self, cluster, status) -> None:  # type: ignore[no-untyped-def]
        await self._clusters[cluster].publish(cluster, status)

    async def record(  # type: ignore[no-untyped-def]
        self, cluster, *, reason, message, warning=False, measured=None
    ) -> None:
        await self._clusters[cluster].record(
            cluster, reason=reason, message=message, warning=warning, measured=measured
        )


def main() -> None:
    tune_for_many_actors()  # as `etcd-supervisor` does at start
    report = trio.run(run)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "metrics.json").write_text(json.dumps(report, indent=2) + "\n")
    for key, value in report.items():
        print(f"{key:34} {value}")
    print(
        f"/metrics of {CLUSTERS} clusters: median {report['metrics']['median_ms']} ms, "  # type: ignore[index]
        f"p99 {report['metrics']['p99_ms']} ms (target < 100 ms); rendering at each scrape on the loop "
        f"(before): median {report['before_render_on_loop_each_scrape']['median_ms']} ms, "  # type: ignore[index]
        f"p99 {report['before_render_on_loop_each_scrape']['p99_ms']} ms; one render costs"  # type: ignore[index]
        f" {report['render_cpu_median_ms']} ms of CPU; load average {report['load_average_1m']}"
        f" on {report['cpu_cores']} cores"
    )


if __name__ == "__main__":
    main()

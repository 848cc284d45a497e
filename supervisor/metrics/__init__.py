"""Observability: the HTTP endpoints (/healthz /readyz /metrics /loglevel on hypercorn) and the
Prometheus metrics, derived from what the actors and the runtime already publish.

- http.py      the ASGI app and its server; Readiness; the daemon loop's heartbeat for /healthz
- server_thread.py  the server's own trio loop and thread
- exposition.py     the /metrics body, rendered in a worker thread while scraped
- clusters.py  cluster metrics: a wrapper of the status and event sinks, and a per-cluster child
- runtime.py   the actor runtime's metrics (restarts, escalations, mailboxes, reconcile time)
- operator.py  the Kubernetes operator's own metrics (leadership, watches, API errors)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prometheus_client import CollectorRegistry, disable_created_metrics

from supervisor.metrics.runtime import RuntimeMetrics
from supervisor.runtime import telemetry

# No `_created` series beside every counter: they double a scrape of many clusters for nothing.
disable_created_metrics()


@asynccontextmanager
async def open_runtime_metrics(registry: CollectorRegistry) -> AsyncIterator[RuntimeMetrics]:
    """The actor runtime reports into `registry` for the life of the block."""
    metrics = RuntimeMetrics(registry)
    telemetry.observe_runtime(metrics)
    try:
        yield metrics
    finally:
        telemetry.observe_runtime(None)

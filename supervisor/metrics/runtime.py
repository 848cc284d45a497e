"""The actor runtime's metrics: an observer installed into supervisor.runtime, read at scrape time."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from supervisor.runtime import telemetry

PREFIX = "etcd_supervisor"
DRAIN_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class RuntimeMetrics(Collector):
    """Restarts and escalations per supervisor kind, messages, mailbox depth and drains per actor kind."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.restarts = Counter(
            f"{PREFIX}_supervisor_restarts",
            "Restart decisions, per supervisor kind",
            ("supervisor",),
            registry=registry,
        )
        self.escalations = Counter(
            f"{PREFIX}_supervisor_escalations",
            "Supervisors that gave up (restart intensity exceeded)",
            ("supervisor",),
            registry=registry,
        )
        self.drain = Histogram(
            f"{PREFIX}_actor_drain_duration_seconds",
            'on_drained per actor kind; actor="cluster" is one reconcile',
            ("actor",),
            buckets=DRAIN_BUCKETS,
            registry=registry,
        )
        # Per message: a plain tally, turned into a counter family when scraped.
        self._handled: Tally[str] = Tally()
        registry.register(self)

    # --- RuntimeObserver ---------------------------------------------------------------------

    def restarted(self, supervisor: str) -> None:
        self.restarts.labels(supervisor).inc()

    def escalated(self, supervisor: str) -> None:
        self.escalations.labels(supervisor).inc()

    def handled(self, actor: str) -> None:
        self._handled[actor] += 1

    def drained(self, actor: str, seconds: float) -> None:
        self.drain.labels(actor).observe(seconds)

    # --- Collector ---------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        handled = CounterMetricFamily(
            f"{PREFIX}_actor_messages_handled", "Messages handled", labels=("actor",)
        )
        for kind, count in sorted(self._handled.items()):
            handled.add_metric((kind,), count)
        depth = GaugeMetricFamily(
            f"{PREFIX}_actor_mailbox_depth", "Messages waiting, summed over running actors", labels=("actor",)
        )
        running = GaugeMetricFamily(f"{PREFIX}_actors_running", "Actors running", labels=("actor",))
        depths: Tally[str] = Tally()
        counts: Tally[str] = Tally()
        for kind, stats in telemetry.running_mailboxes():
            depths[kind] += stats.depth
            counts[kind] += 1
        for kind in sorted(counts):
            depth.add_metric((kind,), depths[kind])
            running.add_metric((kind,), counts[kind])
        yield from (handled, depth, running)

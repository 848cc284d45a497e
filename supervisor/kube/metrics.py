"""The operator's own metrics, read at scrape time from the statistics its parts already keep:
leadership (LeaderElector), watches and re-lists (Watcher), status writes (KubeStatusSink)."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from supervisor.kube.client import KubeClient
from supervisor.kube.leader import LeaderElector
from supervisor.kube.status import KubeStatusSink
from supervisor.kube.watch import Watcher

PREFIX = "etcd_supervisor"


class OperatorMetrics(Collector):
    def __init__(self, registry: CollectorRegistry) -> None:
        self.elector: LeaderElector | None = None
        self.status: KubeStatusSink | None = None
        self.client: KubeClient | None = None
        self._watchers: dict[int, Watcher] = {}
        registry.register(self)

    def watching(self, watchers: Iterable[Watcher]) -> None:
        """Count these watchers from now on (they are kept: their totals must never go down)."""
        for w in watchers:
            self._watchers[id(w)] = w

    def collect(self) -> Iterator[Metric]:
        yield from self._leadership()
        yield from self._watches()
        if self.client is not None:
            yield _counter("kube_requests", "Kubernetes API requests (watches apart)", self.client.requests)
            errors = CounterMetricFamily(
                f"{PREFIX}_kube_request_errors",
                "Kubernetes API requests that failed, by HTTP status (0: no answer)",
                labels=("code",),
            )
            for code, count in sorted(self.client.errors.items()):
                errors.add_metric((str(code),), count)
            yield errors
        if self.status is not None:
            s = self.status.statistics()
            yield _counter("status_writes", "Status subresource writes", s.writes)
            yield _counter("status_conflicts", "Status writes answered 409 Conflict", s.conflicts)

    def _leadership(self) -> Iterator[Metric]:
        if self.elector is None:
            return
        s = self.elector.statistics()
        yield GaugeMetricFamily(
            f"{PREFIX}_is_leader", "1 while this replica holds the Lease", 1.0 if s.is_leader else 0.0
        )
        yield _counter("leader_acquisitions", "Times this replica acquired the Lease", s.acquisitions)
        yield _counter("leader_losses", "Times this replica lost the Lease", s.losses)

    def _watches(self) -> Iterator[Metric]:
        totals: dict[str, Tally[str]] = {
            "lists": Tally(),
            "watches": Tally(),
            "expired": Tally(),
            "errors": Tally(),
        }
        synced = GaugeMetricFamily(
            f"{PREFIX}_watch_synced", "1 once every watch listed in full", labels=("resource",)
        )
        all_synced: dict[str, bool] = {}
        for w in list(self._watchers.values()):
            s, resource = w.statistics(), w.resource_name
            totals["lists"][resource] += s.lists
            totals["watches"][resource] += s.watches
            totals["expired"][resource] += s.expired
            totals["errors"][resource] += s.errors
            all_synced[resource] = all_synced.get(resource, True) and s.synced
        helps = {
            "lists": "Full lists (the first, re-lists after 410 Gone, resyncs)",
            "watches": "Watch connections opened (each after the first is a watch restart)",
            "expired": "410 Gone answers that forced a re-list",
            "errors": "Failed Kubernetes API lists or watches",
        }
        for key, help in helps.items():
            family = CounterMetricFamily(f"{PREFIX}_watch_{key}", help, labels=("resource",))
            for resource, value in sorted(totals[key].items()):
                family.add_metric((resource,), value)
            yield family
        for resource, ok in sorted(all_synced.items()):
            synced.add_metric((resource,), 1.0 if ok else 0.0)
        yield synced


def _counter(name: str, help: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"{PREFIX}_{name}", help, value=value)

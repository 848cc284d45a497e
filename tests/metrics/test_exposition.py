"""/metrics rendered off the request path: scrapes share renderings made in a worker thread,
kept fresh while scraped, none while nobody scrapes; a rendering that fails keeps the last."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import trio
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from supervisor.metrics.exposition import Exposition
from tests.harness.poll import eventually


class Probe(Collector):
    """Counts its collections, notes the thread they ran on, and fails when told to."""

    def __init__(self) -> None:
        self.threads: set[int] = set()
        self.calls = 0
        self.fail = False

    def collect(self) -> Iterator[Metric]:
        self.threads.add(threading.get_ident())
        self.calls += 1
        if self.fail:
            raise RuntimeError("collector broke")
        yield GaugeMetricFamily("probe", "a probe", value=1.0)


def value(body: bytes, name: str) -> float:
    (line,) = [line for line in body.decode().splitlines() if line.startswith(f"{name} ")]
    return float(line.split()[1])


async def test_scrapes_share_renderings_made_in_a_thread_and_fresh_while_scraped() -> None:
    registry, probe = CollectorRegistry(), Probe()
    registry.register(probe)
    gauge = Gauge("answer", "a value that changes", registry=registry)
    exposition = Exposition(registry, every=0.5, idle_after=1.5)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(exposition.run)
        gauge.set(1)
        assert value(await exposition.body(), "answer") == 1  # the first scrape renders at once
        assert probe.threads and threading.get_ident() not in probe.threads  # never on the loop

        # Many scrapes, one rendering: they are answered from the latest.
        for _ in range(20):
            assert value(await exposition.body(), "answer") == 1
        assert exposition.renderings == 1

        # A change shows within the refresh interval, without a scrape waiting for it.
        gauge.set(2)
        await eventually(lambda: exposition.body(), lambda b: value(b, "answer") == 2, within=10, every=0.05)

        # A rendering that fails is logged; scrapes keep the last good one meanwhile.
        rendered, calls = exposition.renderings, probe.calls
        probe.fail = True
        gauge.set(3)
        await eventually(lambda: probe.calls > calls, within=10, every=0.01, what="a failed rendering")
        assert value(await exposition.body(), "answer") == 2 and exposition.renderings == rendered
        probe.fail = False
        await eventually(lambda: exposition.body(), lambda b: value(b, "answer") == 3, within=10, every=0.05)

        # Nobody scrapes: renderings stop after idle_after.
        await trio.sleep(2.5)
        idle = exposition.renderings
        await trio.sleep(1.5)
        assert exposition.renderings == idle
        # The next scrape after idling renders fresh at once.
        gauge.set(4)
        assert value(await exposition.body(), "answer") == 4
        nursery.cancel_scope.cancel()

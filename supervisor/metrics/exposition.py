"""The /metrics body, rendered off the request path so a scrape answers at once.

Rendering the registry of a daemon with 100 clusters (~2,000 series) costs 20-30 ms of CPU, and
on the trio loop it also waits behind every cluster's work: a scrape's p99 went to seconds on a
busy machine. So the body is rendered in a worker thread (the loop keeps running the actors),
every REFRESH_EVERY seconds while someone scrapes, and a scrape answers with the latest one: at
most a few seconds old, well inside Prometheus' own scrape interval. The first scrape, or one
after IDLE_AFTER without any, renders there and then; nobody scraping costs nothing.

Reading the collectors from another thread is safe: prometheus-client's metrics take their own
locks, and our collectors copy each dict they read in one step that runs no Python code (`list`
or `sorted` of its items, under the GIL) and otherwise read frozen records.
"""

from __future__ import annotations

import logging
import math

import trio
from prometheus_client import CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

REFRESH_EVERY = 5.0  # seconds between renderings while scraped
IDLE_AFTER = 120.0  # no scrape for this long: stop rendering until the next one


class Exposition:
    """The latest rendering of a registry, kept fresh while scraped (`run` beside the server)."""

    def __init__(
        self, registry: CollectorRegistry, *, every: float = REFRESH_EVERY, idle_after: float = IDLE_AFTER
    ) -> None:
        self._registry = registry
        self._every, self._idle_after = every, idle_after
        self._body: bytes | None = None
        self._rendered_at = -math.inf  # trio time the rendering began
        self._asked_at = -math.inf
        self._rendering = trio.Lock()  # one rendering at a time; a scrape waiting for one shares it
        self.renderings = 0  # how many so far (tests, the benchmark)

    async def body(self) -> bytes:
        """The exposition for a scrape: the latest rendering, or a new one when it is too old."""
        now = trio.current_time()
        self._asked_at = now
        if self._body is None or now - self._rendered_at > 2 * self._every:
            await self._render(unless_since=now)
        assert self._body is not None
        return self._body

    async def run(self) -> None:
        """Re-render every `every` seconds while scrapes come; a failed rendering keeps the last."""
        while True:
            await trio.sleep(self._every)
            if trio.current_time() - self._asked_at > self._idle_after:
                continue
            try:
                await self._render(unless_since=trio.current_time())
            except Exception:
                log.exception("rendering /metrics failed; serving the previous rendering")

    async def _render(self, *, unless_since: float) -> None:
        async with self._rendering:
            if self._rendered_at >= unless_since:  # rendered while we waited for the lock
                return
            began = trio.current_time()
            self._body = await trio.to_thread.run_sync(generate_latest, self._registry)
            self._rendered_at = began
            self.renderings += 1

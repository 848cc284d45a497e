"""The HTTP endpoints on a loop and thread of their own: they answer while the daemon's trio
loop is busy, and /healthz still tells when that loop stalls."""

from __future__ import annotations

import errno
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest
import trio
from prometheus_client import CollectorRegistry, Gauge

from supervisor.metrics.http import Endpoints, LoopBeat, Readiness, serve_endpoints
from supervisor.runtime import leaf_exceptions
from tests.harness.poll import until


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as failed:
        return failed.code, failed.read().decode()


async def test_endpoints_answer_while_the_daemons_loop_is_blocked_and_healthz_tells() -> None:
    registry = CollectorRegistry()
    Gauge("answer", "a value", registry=registry).set(42)
    endpoints = Endpoints(Readiness(), registry)
    endpoints.beat = LoopBeat(every=0.1, stall_limit=1.0)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_endpoints, 0, endpoints)
        assert await trio.to_thread.run_sync(get, port, "/healthz") == (200, "ok\n")

        def while_blocked() -> tuple[tuple[int, str], tuple[int, str]]:
            scraped = get(port, "/metrics")
            stalled = until(
                lambda: get(port, "/healthz"), lambda a: a[0] == 503, within=5, what="/healthz failing"
            )
            return scraped, stalled

        with ThreadPoolExecutor(1) as pool:
            answers = pool.submit(while_blocked)
            time.sleep(2.5)  # noqa: ASYNC251 - the point: the daemon's loop does not run meanwhile
            scraped, stalled = answers.result(timeout=10)
        assert scraped[0] == 200 and "answer 42.0" in scraped[1], scraped
        assert stalled[1].startswith("the daemon's trio loop has not run for"), stalled
        # The loop runs again: healthy again.
        await trio.to_thread.run_sync(
            lambda: until(lambda: get(port, "/healthz"), lambda a: a[0] == 200, within=10, what="/healthz ok")
        )
        nursery.cancel_scope.cancel()


async def test_a_port_taken_fails_the_start_with_the_bind_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        endpoints = Endpoints(Readiness(), CollectorRegistry())
        with pytest.raises(BaseException) as caught:  # a group: its leaves are checked below
            async with trio.open_nursery() as nursery:
                await nursery.start(partial(serve_endpoints, port, endpoints, host="127.0.0.1"))
    error = caught.value
    leaves = list(leaf_exceptions(error)) if isinstance(error, BaseExceptionGroup) else [error]
    assert any(isinstance(e, OSError) and e.errno == errno.EADDRINUSE for e in leaves), leaves

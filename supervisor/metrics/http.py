"""The daemon's HTTP endpoints: a small ASGI app served by hypercorn on trio, on a trio loop and
thread of its own (server_thread.py), so probes and scrapes never wait behind the actors.

GET /healthz (/livez)   200 while the daemon's trio loop runs (503 once it stalled for STALL_LIMIT)
GET /readyz             200 when every readiness check holds, else 503 naming those that fail
GET /metrics            Prometheus text format, from the registry given (rendered off the
                        request path, at most a few seconds old: exposition.py)
GET /loglevel           the root logger's level
PUT /loglevel  "debug"  change it at run time, no restart (also POST)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry

from supervisor.logs import LEVELS, current_level, set_level
from supervisor.metrics.exposition import Exposition
from supervisor.metrics.server_thread import run_in_thread

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
TEXT = "text/plain; charset=utf-8"
MAX_BODY = 1024
STALL_LIMIT = 10.0  # seconds the daemon's loop may go without running before /healthz fails


class Readiness:
    """Named checks; ready when all hold. A check required but never set counts as failing."""

    def __init__(self) -> None:
        self._checks: dict[str, bool] = {}

    def require(self, name: str) -> None:
        self._checks.setdefault(name, False)

    def set(self, name: str, ok: bool) -> None:
        self._checks[name] = ok

    def drop(self, name: str) -> None:
        self._checks.pop(name, None)

    def failing(self) -> list[str]:
        # A copy first, in one step: the server's thread reads what the daemon's loop writes.
        return sorted(name for name, ok in list(self._checks.items()) if not ok)

    def ready(self) -> bool:
        return not self.failing()


class LoopBeat:
    """When the daemon's loop last ran, for /healthz served from another thread."""

    def __init__(self, every: float = 1.0, stall_limit: float = STALL_LIMIT) -> None:
        self.every, self.stall_limit = every, stall_limit
        self.last = time.monotonic()

    async def run(self) -> None:
        """On the daemon's loop."""
        while True:
            self.last = time.monotonic()
            await trio.sleep(self.every)

    def stalled_for(self) -> float:
        return max(0.0, time.monotonic() - self.last - self.every)


class Endpoints:
    """The ASGI application."""

    def __init__(self, readiness: Readiness, registry: CollectorRegistry) -> None:
        self.readiness = readiness
        self.registry = registry
        self.exposition = Exposition(registry)  # serve_endpoints keeps it fresh
        self.beat = LoopBeat()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        if path == "/loglevel" and method in ("PUT", "POST"):
            status, body = _change_level(await _body(receive))
            await _reply(send, status, body)
            return
        if method not in ("GET", "HEAD"):
            await _reply(send, 405, "GET only (PUT /loglevel to change the log level)\n")
            return
        data: str | bytes
        if path == "/metrics":
            status, content_type, data = 200, CONTENT_TYPE_LATEST, await self.exposition.body()
        else:
            status, content_type, data = self.answer(path)
        await _reply(send, status, data, content_type=content_type, head=method == "HEAD")

    def answer(self, path: str) -> tuple[int, str, str | bytes]:
        if path in ("/healthz", "/livez"):
            stalled = self.beat.stalled_for()
            if stalled > self.beat.stall_limit:
                return 503, TEXT, f"the daemon's trio loop has not run for {stalled:.0f}s\n"
            return 200, TEXT, "ok\n"
        if path == "/readyz":
            failing = self.readiness.failing()
            if not failing:
                return 200, TEXT, "ok\n"
            return 503, TEXT, "".join(f"not ready: {name}\n" for name in failing)
        if path == "/loglevel":
            return 200, TEXT, current_level() + "\n"
        return 404, TEXT, "not found\n"


def _change_level(body: bytes) -> tuple[int, str]:
    wanted = body.decode("utf-8", "replace").strip().lower()
    if wanted not in LEVELS:
        return 400, f"loglevel: {wanted!r} is not one of {', '.join(LEVELS)}\n"
    before = current_level()
    set_level(wanted)
    log.warning("log level %s -> %s (HTTP)", before, wanted, extra={"event": "log-level"})
    return 200, wanted + "\n"


async def _body(receive: Receive) -> bytes:
    data = b""
    while True:
        message = await receive()
        data += message.get("body", b"")
        if not message.get("more_body") or len(data) > MAX_BODY:
            return data[:MAX_BODY]


async def _reply(
    send: Send, status: int, body: str | bytes, *, content_type: str = TEXT, head: bool = False
) -> None:
    data = body.encode() if isinstance(body, str) else body
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else data})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def serve_endpoints(
    port: int,
    endpoints: Endpoints,
    *,
    host: str = "0.0.0.0",
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; task_status.started(the bound port) (port 0 picks a free one).
    The server runs on its own loop and thread; the daemon's loop only beats for /healthz."""
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None  # scrapes and probes every few seconds: not worth a log line each
    config.errorlog = logging.getLogger("hypercorn.error")  # through our handlers (JSON)
    config.graceful_timeout = 1.0

    async def server(task_status: trio.TaskStatus[int]) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(endpoints.exposition.run)
            binds: list[str] = await nursery.start(partial(serve, endpoints, config))  # type: ignore[arg-type]
            task_status.started(int(binds[0].rsplit(":", 1)[1]))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(endpoints.beat.run)
        bound: int = await nursery.start(partial(run_in_thread, server, name="http-endpoints"))
        log.info("HTTP endpoints (/healthz /readyz /metrics /loglevel) on port %d", bound)
        task_status.started(bound)

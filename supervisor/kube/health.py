"""/healthz and /readyz for the kubelet's probes: a tiny HTTP/1.1 server on trio sockets.

/healthz answers 200 while the process (its trio loop) is alive. /readyz answers 200 when every
readiness check registered with `Readiness` holds, else 503 naming the ones that do not.
One request per connection; probes need nothing more.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

log = logging.getLogger(__name__)

MAX_REQUEST = 8192
READ_TIMEOUT = 5.0


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
        return sorted(name for name, ok in self._checks.items() if not ok)

    def ready(self) -> bool:
        return not self.failing()


def _response(status: str, body: str) -> bytes:
    data = body.encode()
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + data


def answer(request_line: str, readiness: Readiness) -> bytes:
    parts = request_line.split()
    if len(parts) < 2:
        return _response("400 Bad Request", "bad request\n")
    method, target = parts[0], parts[1].split("?", 1)[0]
    if method not in ("GET", "HEAD"):
        return _response("405 Method Not Allowed", "GET only\n")
    if target in ("/healthz", "/livez"):
        return _response("200 OK", "ok\n")
    if target == "/readyz":
        failing = readiness.failing()
        if not failing:
            return _response("200 OK", "ok\n")
        return _response("503 Service Unavailable", "".join(f"not ready: {name}\n" for name in failing))
    return _response("404 Not Found", "not found\n")


async def _handle(stream: trio.abc.Stream, readiness: Readiness) -> None:
    try:
        data = b""
        with trio.move_on_after(READ_TIMEOUT):
            while b"\r\n\r\n" not in data and b"\n\n" not in data and len(data) < MAX_REQUEST:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                data += chunk
        line = data.split(b"\n", 1)[0].decode("latin-1").strip()
        await stream.send_all(answer(line, readiness))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await trio.aclose_forcefully(stream)


async def serve_health(
    port: int,
    readiness: Readiness,
    *,
    host: str | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve forever; task_status.started(bound port) (port 0 picks a free one)."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    log.info("health endpoints on port %d", bound)

    async def handler(stream: trio.SocketStream) -> None:
        await _handle(stream, readiness)

    await trio.serve_listeners(handler, listeners, task_status=_Started(task_status, bound))


class _Started:
    """Hands serve_listeners' started() the bound port instead of the listener list."""

    def __init__(self, inner: Any, port: int) -> None:
        self._inner, self._port = inner, port

    def started(self, value: Any = None) -> None:
        self._inner.started(self._port)

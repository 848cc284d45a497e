"""Run a trio program (the HTTP server) on a trio loop of its own, in a thread of its own.

The daemon's loop runs every cluster's actors; a request served there waits behind them (a
scrape's p99 was hundreds of ms with 100 clusters on a busy machine). On its own loop the server
answers whatever the daemon's loop is doing: the two share only the GIL. What it reads of the
daemon (readiness checks, metrics, the log level) is read thread-safely (see exposition.py).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import trio

# Started with task_status (what it reports: the caller's started value); runs until cancelled.
Program = Callable[..., Awaitable[None]]

STOP_WITHIN = 5.0  # seconds the thread gets to wind down once the caller is cancelled


async def run_in_thread(
    program: Program, *, name: str, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
) -> None:
    """`program` on its own loop in thread `name`: task_status.started(what it started with),
    then until cancelled (the thread is stopped too) or until the program ends (raised here)."""
    loop = _Loop(program)
    thread = threading.Thread(target=loop.run, name=name, daemon=True)
    thread.start()
    own = trio.CapacityLimiter(1)  # long waits: never take a token of trio's default limiter
    try:
        ok, value = await trio.to_thread.run_sync(loop.started.get, abandon_on_cancel=True, limiter=own)
        if not ok:
            raise value
        task_status.started(value)
        await trio.to_thread.run_sync(thread.join, abandon_on_cancel=True, limiter=own)
        raise RuntimeError(f"{name} stopped: {loop.error!r}") from loop.error
    finally:
        loop.stop()
        with trio.move_on_after(STOP_WITHIN, shield=True):
            await trio.to_thread.run_sync(
                thread.join, abandon_on_cancel=True, limiter=trio.CapacityLimiter(1)
            )


class _Loop:
    def __init__(self, program: Program) -> None:
        self._program = program
        self.started: queue.Queue[tuple[bool, Any]] = queue.Queue()
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._stopped = False

    def run(self) -> None:
        """The thread's body."""
        try:
            trio.run(self._main)
        except BaseException as exc:  # handed to the caller, in its thread
            self.error = exc
        # Read only if it ended before it started (failed, or stopped first): never left waiting.
        self.started.put((False, self.error or RuntimeError("stopped before it started")))

    async def _main(self) -> None:
        async with trio.open_nursery() as nursery:
            with self._lock:
                if self._stopped:
                    return
                self._token, self._scope = trio.lowlevel.current_trio_token(), nursery.cancel_scope
            self.started.put((True, await nursery.start(self._program)))

    def stop(self) -> None:
        """From any thread: cancel the program; the loop then ends."""
        with self._lock:
            self._stopped = True
            if self._token is not None and self._scope is not None:
                try:
                    self._token.run_sync_soon(self._scope.cancel)
                except trio.RunFinishedError:
                    pass

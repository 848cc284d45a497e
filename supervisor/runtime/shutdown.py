"""Graceful stop: a stop request, a grace period for shielded cleanup, then a hard cancel.

trio has a single kind of cancellation, so a supervisor stops a child by cancelling the child's
scope (the request) and lets cleanup run under `open_cleanup_scope()` (shielded from that
request). When the child's `shutdown` grace runs out the supervisor cancels those cleanup scopes
too. Code that shields itself with a bare `trio.CancelScope(shield=True)` cannot be hard
cancelled; use `open_cleanup_scope()` instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import trio


class ChildContext:
    """What the supervisor can reach inside one running child incarnation."""

    __slots__ = ("cleanup_scopes", "hard_cancelled")

    def __init__(self) -> None:
        self.cleanup_scopes: set[trio.CancelScope] = set()
        self.hard_cancelled = False

    def hard_cancel(self) -> None:
        self.hard_cancelled = True
        for scope in list(self.cleanup_scopes):
            scope.cancel()


current_child: ContextVar[ChildContext | None] = ContextVar("supervisor_runtime_child", default=None)


@contextmanager
def open_cleanup_scope() -> Iterator[trio.CancelScope]:
    """A shielded cancel scope for cleanup that the supervisor may still cancel after the grace period.

    Outside a supervised child it is a plain shielded scope.
    """
    ctx = current_child.get()
    scope = trio.CancelScope(shield=True)
    if ctx is None:
        with scope:
            yield scope
        return
    if ctx.hard_cancelled:
        scope.cancel()
    ctx.cleanup_scopes.add(scope)
    try:
        with scope:
            yield scope
    finally:
        ctx.cleanup_scopes.discard(scope)

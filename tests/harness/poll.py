"""The one way tests wait for something to become true: read, check, sleep, until a time limit,
then fail naming what was awaited and the last thing seen."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

T = TypeVar("T")


async def eventually(
    read: Callable[[], Awaitable[T]] | Callable[[], T],
    accept: Callable[[T], bool] = bool,
    *,
    within: float,
    every: float = 0.1,
    what: str = "the condition",
) -> T:
    """The first value of `read()` (sync or async) that `accept` takes, read every `every` s."""
    last: Any = None
    with trio.move_on_after(within):
        while True:
            last = read()
            if inspect.isawaitable(last):
                last = await last
            if accept(last):
                return last
            await trio.sleep(every)
    raise AssertionError(f"{what}: not reached within {within} s; last seen: {last!r}")


def until(
    read: Callable[[], T],
    accept: Callable[[T], bool] = bool,
    *,
    within: float,
    every: float = 0.1,
    what: str = "the condition",
    details: Callable[[], str] | None = None,
) -> T:
    """The same, for code that is not async (harnesses driving processes)."""
    deadline = time.monotonic() + within
    while True:
        last = read()
        if accept(last):
            return last
        if time.monotonic() > deadline:
            extra = f"\n{details()}" if details else ""
            raise TimeoutError(f"{what}: not reached within {within} s; last seen: {last!r}{extra}")
        time.sleep(every)

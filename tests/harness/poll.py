"""The one way tests wait for something to become true: read, check, sleep, until a time limit,
then fail naming what was awaited and the last thing seen. `eventually` for trio code, `until`
for blocking code, `accepted` for a call that is refused (raises) until the cluster can take it."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Sized
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


async def accepted(
    call: Callable[[], Awaitable[T]],
    *,
    refused: tuple[type[BaseException], ...],
    within: float,
    every: float = 0.1,
    what: str = "the call",
    fatal: tuple[type[BaseException], ...] = (),
) -> T:
    """The first answer of `call()` that is not refused with one of `refused`, asked every `every`
    s; an error in `fatal` (or not in `refused`) is raised at once."""
    last: BaseException | None = None
    with trio.move_on_after(within):
        while True:
            try:
                return await call()
            except fatal:
                raise
            except refused as exc:
                last = exc
            await trio.sleep(every)
    raise AssertionError(f"{what}: still refused after {within} s; last refusal: {last!r}")


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


async def more_acknowledged(acked: Sized, count: int, *, within: float) -> None:
    """Until `count` more writes are in `acked` (a writer's record of acknowledged writes): the
    cluster takes writes again."""
    target = len(acked) + count
    await eventually(
        lambda: len(acked), lambda n: n >= target, within=within, every=0.05, what=f"{count} more writes"
    )

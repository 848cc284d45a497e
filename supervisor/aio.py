"""The one bridge between trio (our runtime) and asyncio (kubernetes-asyncio, grpclib).

Every other module stays trio-only: adapters create and use asyncio objects solely
through the helpers here, so the asyncio loop's rules live in one place.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeVar

import trio
import trio_asyncio

log = logging.getLogger(__name__)

T = TypeVar("T")


def _log_instead_of_stopping(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    # trio-asyncio's default handler ends the whole `open_loop` block on any report
    # (an unretrieved future, a transport error); one stray callback must not stop the daemon.
    exc = context.get("exception")
    log.warning(
        "asyncio reported: %s",
        context.get("message", "unknown error"),
        exc_info=(type(exc), exc, exc.__traceback__) if exc else None,
    )


@asynccontextmanager
async def open_asyncio_loop() -> AsyncIterator[asyncio.AbstractEventLoop]:
    """Open the asyncio loop once, at the root of the trio task tree."""
    async with trio_asyncio.open_loop() as loop:
        loop.set_exception_handler(_log_instead_of_stopping)
        yield loop


async def run_asyncio(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Await the asyncio coroutine function ``fn(*args, **kwargs)`` from trio."""
    return await trio_asyncio.aio_as_trio(fn)(*args, **kwargs)  # type: ignore[no-any-return]


@asynccontextmanager
async def enter_asyncio(cm: AbstractAsyncContextManager[T]) -> AsyncIterator[T]:
    """Enter an asyncio async context manager (a session, a channel) from trio."""
    async with trio_asyncio.aio_as_trio(cm) as value:
        yield value


async def pump_asyncio_iterator(
    make_iterator: Callable[[], AsyncIterator[T]], send: trio.MemorySendChannel[T]
) -> None:
    """Drain an asyncio async iterator into a trio channel.

    The whole iteration runs as one asyncio coroutine (wrapping the iterator itself
    would cost a task per item); items cross into trio through the channel, and the
    channel's bound gives backpressure.
    """

    async def drain() -> None:
        async for item in make_iterator():
            await trio_asyncio.trio_as_aio(send.send)(item)

    async with send:
        await run_asyncio(drain)


def running_in_asyncio_loop() -> bool:
    """Whether an asyncio loop (ours) is open around the current trio task."""
    try:
        return trio_asyncio.current_loop.get() is not None
    except LookupError:
        return False

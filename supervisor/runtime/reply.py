"""The answer slot of a request/reply call."""

from __future__ import annotations

from typing import Generic, TypeVar

import trio

T = TypeVar("T")


class Reply(Generic[T]):
    """Carried inside a request message; the actor resolves it once with `set` or `fail`.

    Resolving twice is ignored rather than an error: the caller may already have given up
    (timeout) or been told the actor stopped, and the actor must not crash for answering late.
    """

    __slots__ = ("_done", "_error", "_value")

    def __init__(self) -> None:
        self._done = trio.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def set(self, value: T) -> None:
        if not self._done.is_set():
            self._value = value
            self._done.set()

    def fail(self, exc: BaseException) -> None:
        if not self._done.is_set():
            self._error = exc
            self._done.set()

    async def wait(self) -> T:
        """Wait for the answer; an exception given to `fail` is raised here."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

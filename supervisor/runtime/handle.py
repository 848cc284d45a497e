"""A caller's reference to an actor: its methods hide the mailbox and the request plumbing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import trio

from supervisor.runtime.errors import ActorStopped, CallTimeout
from supervisor.runtime.mailbox import Mailbox
from supervisor.runtime.reply import Reply
from supervisor.runtime.stats import MailboxStatistics

M = TypeVar("M")
T = TypeVar("T")


class Handle(Generic[M]):
    """Talks to whichever actor currently runs on `mailbox`, so it survives restarts."""

    __slots__ = ("_mailbox", "id")

    def __init__(self, mailbox: Mailbox[M], *, id: str | None = None) -> None:
        self._mailbox = mailbox
        self.id = id

    def __repr__(self) -> str:
        return f"Handle({self.id!r})"

    async def send(self, msg: M) -> None:
        """Deliver `msg`, waiting for room; ActorStopped if the mailbox is closed."""
        try:
            await self._mailbox.send(msg)
        except trio.ClosedResourceError:
            raise ActorStopped(f"actor {self.id!r}: mailbox closed") from None

    def send_nowait(self, msg: M) -> None:
        """Deliver `msg` or raise trio.WouldBlock when full; ActorStopped if closed."""
        try:
            self._mailbox.send_nowait(msg)
        except trio.ClosedResourceError:
            raise ActorStopped(f"actor {self.id!r}: mailbox closed") from None

    # The agreed API takes a timeout (like gen_server:call) rather than relying on fail_after.
    async def call(self, make_request: Callable[[Reply[T]], M], *, timeout: float) -> T:  # noqa: ASYNC109
        """Send `make_request(reply)` and wait for the actor to resolve `reply`.

        The timeout covers waiting for mailbox room too. Raises CallTimeout when it runs out,
        ActorStopped if the actor that received the request crashed or stopped before
        answering (or the actor was stopped while the request was queued), and whatever
        exception the actor passed to `Reply.fail`.
        """
        reply: Reply[T] = Reply()
        msg = make_request(reply)
        mailbox = self._mailbox
        mailbox._register_call(msg, reply)
        try:
            with trio.move_on_after(timeout):
                try:
                    await mailbox.send(msg)
                except trio.ClosedResourceError:
                    raise ActorStopped(f"actor {self.id!r}: mailbox closed") from None
                return await reply.wait()
            raise CallTimeout(f"actor {self.id!r} did not answer within {timeout}s")
        finally:
            # A request still queued after we gave up must not be failed or tracked later.
            mailbox._forget_call(msg)

    def statistics(self) -> MailboxStatistics:
        return self._mailbox.statistics()

"""A bounded actor mailbox that coalesces level-triggered observations by key."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import trio

from supervisor.runtime.errors import ActorStopped, CallSuperseded
from supervisor.runtime.reply import Reply
from supervisor.runtime.stats import MailboxStatistics

M = TypeVar("M")


class _Keyed:
    """Queue placeholder for a coalescable message: the message itself lives in `_pending`,
    so a newer one can replace it without losing the first one's place in line."""

    __slots__ = ("key",)

    def __init__(self, key: Hashable) -> None:
        self.key = key


class Mailbox(Generic[M]):
    """Bounded FIFO of messages for one actor.

    A message whose `coalesce_key` is not None replaces a pending message with the same key
    (keeping the first one's queue position) and then never waits or fails: observations are
    level-triggered, so only the latest fact matters and a slow actor must never stall a watch.
    Messages whose key is None (commands) are never coalesced and never dropped; they wait
    for room instead.
    """

    __slots__ = (
        "_calls",
        "_capacity",
        "_closed",
        "_coalesce_key",
        "_coalesced",
        "_pending",
        "_queue",
        "_receivers",
        "_senders",
        "_sent",
    )

    def __init__(self, capacity: int, *, coalesce_key: Callable[[M], Hashable | None] | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"mailbox capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        self._coalesce_key = coalesce_key
        self._queue: deque[Any] = deque()
        self._pending: dict[Hashable, M] = {}
        self._closed = False
        self._receivers = trio.lowlevel.ParkingLot()
        self._senders = trio.lowlevel.ParkingLot()
        self._sent = 0
        self._coalesced = 0
        # Requests sent by Handle.call and not yet received, by id(message); the tuple keeps
        # the message alive so its id cannot be reused. Lets the actor loop learn which Reply it
        # holds without the runtime knowing the message types.
        self._calls: dict[int, tuple[M, Reply[Any]]] = {}

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def closed(self) -> bool:
        return self._closed

    def send_nowait(self, msg: M) -> None:
        """Enqueue `msg`; raise trio.WouldBlock if full, trio.ClosedResourceError if closed."""
        if self._closed:
            raise trio.ClosedResourceError("mailbox is closed")
        key = None if self._coalesce_key is None else self._coalesce_key(msg)
        if key is None:
            if len(self._queue) >= self._capacity:
                raise trio.WouldBlock
            self._queue.append(msg)
        elif key in self._pending:
            replaced = self._pending[key]
            self._pending[key] = msg
            self._sent += 1
            self._coalesced += 1
            if self._calls:
                entry = self._calls.pop(id(replaced), None)
                if entry is not None:
                    entry[1].fail(CallSuperseded(f"request replaced by a newer message with key {key!r}"))
            return
        else:
            if len(self._queue) >= self._capacity:
                raise trio.WouldBlock
            self._pending[key] = msg
            self._queue.append(_Keyed(key))
        self._sent += 1
        self._receivers.unpark()

    async def send(self, msg: M) -> None:
        """Enqueue `msg`, waiting while the mailbox is full."""
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                self.send_nowait(msg)
            except trio.WouldBlock:
                await self._senders.park()
                continue
            break
        await trio.lowlevel.cancel_shielded_checkpoint()

    def receive_nowait(self) -> M:
        """Dequeue the oldest message; trio.WouldBlock if empty, trio.EndOfChannel once closed and drained."""
        if not self._queue:
            if self._closed:
                raise trio.EndOfChannel
            raise trio.WouldBlock
        item = self._queue.popleft()
        if type(item) is _Keyed:
            item = self._pending.pop(item.key)
        self._senders.unpark()
        return item  # type: ignore[no-any-return]

    async def receive(self) -> M:
        """Wait for and dequeue the oldest message."""
        await trio.lowlevel.checkpoint_if_cancelled()
        parked = False
        while True:
            try:
                msg = self.receive_nowait()
            except trio.WouldBlock:
                await self._receivers.park()
                parked = True
                continue
            break
        if not parked:
            # Parking already yielded; only the fast path owes the scheduler a checkpoint.
            await trio.lowlevel.cancel_shielded_checkpoint()
        return msg

    def close(self) -> None:
        """Refuse further sends; receivers drain what is pending, then get trio.EndOfChannel.

        Outstanding calls fail with ActorStopped: nobody will answer them.
        """
        if self._closed:
            return
        self._closed = True
        calls, self._calls = self._calls, {}
        for _, reply in calls.values():
            reply.fail(ActorStopped("mailbox closed"))
        self._receivers.unpark_all()
        self._senders.unpark_all()

    def statistics(self) -> MailboxStatistics:
        return MailboxStatistics(
            depth=len(self._queue), capacity=self._capacity, sent=self._sent, coalesced=self._coalesced
        )

    # Runtime-internal: the call registry shared by Handle.call and the actor loop.

    def _register_call(self, msg: M, reply: Reply[Any]) -> None:
        self._calls[id(msg)] = (msg, reply)

    def _forget_call(self, msg: M) -> None:
        entry = self._calls.get(id(msg))
        if entry is not None and entry[0] is msg:
            del self._calls[id(msg)]

    def _claim_call(self, msg: M) -> Reply[Any] | None:
        """Called by the actor loop on receipt: the Reply this message carries, if it is a call."""
        entry = self._calls.pop(id(msg), None)
        return None if entry is None else entry[1]

    def _fail_queued_calls(self, exc: BaseException) -> None:
        calls, self._calls = self._calls, {}
        for _, reply in calls.values():
            reply.fail(exc)

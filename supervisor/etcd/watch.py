"""The Watch RPC: follow a key range's history from a revision, across reconnects and members.

`open_watch(client, ...)` yields a `Watch`; iterate it for `WatchBatch`es in revision order.
Each stream carries one watch. When a member goes away (killed, stopped, partitioned from its
leader: the watch asks for `hasleader`, so a member that lost its leader cancels it) the watch
moves to the next endpoint and resumes right after the last revision it delivered, so the
consumer sees every change exactly once. A compaction that overtakes the watch ends it with
`WatchCompacted` (the history from there is gone; the caller must start over from a snapshot).

Progress notifications (`WatchBatch.progress`) say "nothing for this range up to revision R":
etcd sends them every few minutes when asked (`progress_notify`), and `request_progress()`
asks for one now. Every one is delivered, also when it names no newer revision than the last
batch (a quiet cluster): the caller hears that the stream is alive. etcd 3.4 may answer that
request before it has delivered every event below the revision it names (fixed in 3.5.8); on
3.5 and later the answer follows them. So a watch of the whole keyspace, where every revision
is an event and a progress answer can say nothing new, opens with `progress_advances=False`:
its answers then prove the stream alive but never move the point it resumes from.

A member that stops answering without closing its connection (frozen, or cut off by a network
that drops packets) leaves a stream that neither errors nor delivers: only the caller can tell,
by hearing nothing, not even answers to progress requests. `move_to_another_member()` then
abandons that member for the next one, resuming as after any failure.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
from grpclib.client import Channel, Stream
from grpclib.const import Cardinality

from proto.etcd import etcdserverpb as pb
from proto.etcd import mvccpb
from supervisor.aio import pump_asyncio_iterator, run_asyncio
from supervisor.backoff import Backoff

from . import wire
from .client import EtcdClient, sole_error
from .errors import Compacted, EtcdError, EtcdUnavailable, NotSupportedForLearner
from .records import KeyValue
from .transport import Endpoint

WATCH_METHOD = "/etcdserverpb.Watch/Watch"
# Between attempts on the endpoints after a failure: quick at first, then at most every 2 s.
RECONNECT = Backoff(initial=0.05, maximum=2.0, multiplier=2.0, jitter=0.1)
_QUEUE = 64  # responses in flight between the stream and the consumer
PROGRESS_SEND_LIMIT = 2.0


class WatchCompacted(Compacted):
    """The revision the watch needed is compacted away: its history is lost from there."""

    def __init__(self, compact_revision: int, *, endpoint: str | None = None) -> None:
        super().__init__(f"watch overtaken by compaction at revision {compact_revision}", endpoint=endpoint)
        self.compact_revision = compact_revision


class EventKind(enum.Enum):
    PUT = "put"
    DELETE = "delete"


@attrs.frozen
class WatchEvent:
    kind: EventKind
    kv: KeyValue  # for a delete: the key, and the deletion's revision as mod_revision
    prev_kv: KeyValue | None = None  # only when asked for (prev_kv=True)

    @property
    def revision(self) -> int:
        return self.kv.mod_revision


@attrs.frozen
class WatchBatch:
    """Changes of one revision range, in order, or a progress notification (no events)."""

    events: tuple[WatchEvent, ...]
    # Every change of the range up to this revision has been delivered.
    revision: int

    @property
    def progress(self) -> bool:
        return not self.events


@attrs.define
class WatchStatistics:
    reconnects: int = 0
    endpoint: str = ""
    moves: int = 0  # members abandoned by move_to_another_member()


class Watch:
    """One watch, followed by a task of its own; iterate for batches."""

    def __init__(
        self,
        client: EtcdClient,
        key: bytes,
        range_end: bytes,
        start_revision: int,
        *,
        progress_notify: bool,
        prev_kv: bool,
        progress_advances: bool = True,
    ) -> None:
        self._client = client
        self._key, self._range_end = key, range_end
        self._progress_notify, self._prev_kv = progress_notify, prev_kv
        self._progress_advances = progress_advances
        # The next revision to ask for on a (re)connect: one past the last delivered.
        self._next = start_revision
        self._stream: Stream[Any, Any] | None = None
        self._on_member = trio.CancelScope()  # the current member's stream; cancelled to move on
        self._send, self._receive = trio.open_memory_channel[WatchBatch | EtcdError](_QUEUE)
        self.statistics = WatchStatistics()

    @property
    def revision(self) -> int:
        """Every change up to this revision has been delivered (start_revision - 1 at first)."""
        return self._next - 1

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> WatchBatch:
        try:
            item = await self._receive.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
        if isinstance(item, EtcdError):
            raise item
        return item

    async def request_progress(self) -> None:
        """Ask for a progress notification now (ignored while reconnecting: one comes after)."""
        stream = self._stream
        if stream is not None:
            request = pb.WatchRequest(progress_request=pb.WatchProgressRequest())
            # A stream whose member just died can block a send until its connection times out:
            # the follower notices the break by itself, so this never waits long.
            with trio.move_on_after(PROGRESS_SEND_LIMIT):
                try:
                    await run_asyncio(stream.send_message, request)
                except Exception:  # the stream broke meanwhile; the follower reconnects
                    pass

    def move_to_another_member(self) -> str:
        """Abandon the member serving the watch (it went silent) for the next one, resuming
        right after the last delivered revision. Returns the member's endpoint."""
        self._on_member.cancel()
        self.statistics.moves += 1
        return self.statistics.endpoint

    async def follow(self) -> None:
        """Deliver batches until cancelled or a failure no endpoint can mend."""
        streak, previous = 0, None
        async with self._send:
            while True:
                url = _after(previous, self._client.endpoints)
                before = self._next
                try:
                    with trio.CancelScope() as self._on_member:
                        await self._follow_on(Endpoint.parse(url))
                except (EtcdUnavailable, NotSupportedForLearner):
                    pass  # this member cannot serve the watch now: the next one may
                except EtcdError as error:
                    await self._send.send(error)  # compacted, or refused: the consumer decides
                    return
                previous = url
                streak = 0 if self._next > before else streak + 1  # it delivered: no backoff
                self.statistics.reconnects += 1
                await trio.sleep(RECONNECT.base_delay(min(streak, 10)))

    async def _follow_on(self, endpoint: Endpoint) -> None:
        self.statistics.endpoint = endpoint.url
        metadata = {"hasleader": "true"}  # a member that loses its leader cancels the watch
        token = await self._client.stream_token()
        if token:
            metadata["token"] = token
        create = pb.WatchCreateRequest(
            key=self._key,
            range_end=self._range_end,
            start_revision=self._next,
            progress_notify=self._progress_notify,
            prev_kv=self._prev_kv,
        )

        async def responses(channel: Channel) -> AsyncIterator[pb.WatchResponse]:
            async with channel.request(
                WATCH_METHOD, Cardinality.STREAM_STREAM, pb.WatchRequest, pb.WatchResponse, metadata=metadata
            ) as stream:
                await stream.send_message(pb.WatchRequest(create_request=create))
                self._stream = stream
                try:
                    async for response in stream:
                        yield response
                finally:
                    self._stream = None

        send, receive = trio.open_memory_channel[pb.WatchResponse](_QUEUE)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump_asyncio_iterator, self._client.stream_of(endpoint, responses), send)
                async with receive:
                    # A member that does not even confirm the watch (a connection to a process
                    # that is gone) is given up for the next one.
                    with trio.move_on_after(self._client.call_timeout) as confirming:
                        first = await receive.receive()
                    if confirming.cancelled_caught:
                        raise EtcdUnavailable("the watch was not confirmed in time", endpoint=endpoint.url)
                    await self._deliver(first, endpoint)
                    async for response in receive:
                        await self._deliver(response, endpoint)
        except BaseExceptionGroup as group:
            raise sole_error(group) from None
        raise EtcdUnavailable("the watch stream ended", endpoint=endpoint.url)

    async def _deliver(self, response: pb.WatchResponse, endpoint: Endpoint) -> None:
        if response.compact_revision:
            raise WatchCompacted(response.compact_revision, endpoint=endpoint.url)
        if response.canceled:
            # "no leader" (hasleader) and a member shutting down: another member may serve it.
            raise EtcdUnavailable(f"watch canceled: {response.cancel_reason}", endpoint=endpoint.url)
        if response.created:
            return
        events = tuple(_event(e) for e in response.events)
        # Without events: a progress notification. One at or below what was delivered already
        # (a quiet range, a member catching up) moves nothing, but says the stream is alive.
        if events:
            last = events[-1].revision
        else:
            last = max(response.header.revision, self.revision) if self._progress_advances else self.revision
        self._next = last + 1
        await self._send.send(WatchBatch(events, last))


def _after(previous: str | None, endpoints: tuple[str, ...]) -> str:
    """The endpoint to try after `previous`: the next one in the list, so a failing or silent
    member is not tried again before the others (the first one at the start)."""
    if previous in endpoints:
        return endpoints[(endpoints.index(previous) + 1) % len(endpoints)]
    return endpoints[0]


def _event(e: mvccpb.Event) -> WatchEvent:
    kind = EventKind.DELETE if e.type == mvccpb.EventEventType.DELETE else EventKind.PUT
    prev = wire.key_value(e.prev_kv) if e.prev_kv is not None and e.prev_kv.key else None
    return WatchEvent(kind, wire.key_value(e.kv), prev)


@asynccontextmanager
async def open_watch(
    client: EtcdClient,
    key: bytes,
    range_end: bytes = b"",
    *,
    start_revision: int,
    progress_notify: bool = True,
    prev_kv: bool = False,
    progress_advances: bool = True,
) -> AsyncIterator[Watch]:
    """Watch `key` (or [key, range_end)) from `start_revision` on, for the block's lifetime.

    `progress_advances=False`: progress answers never move the resume point (see above)."""
    if start_revision < 1:
        raise ValueError("start_revision must be at least 1")
    watch = Watch(
        client,
        key,
        range_end,
        start_revision,
        progress_notify=progress_notify,
        prev_kv=prev_kv,
        progress_advances=progress_advances,
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch.follow)
        try:
            yield watch
        finally:
            nursery.cancel_scope.cancel()

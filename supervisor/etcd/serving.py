"""A member's gRPC health (grpc.health.v1), followed the way a gRPC client's health checking does.

etcd says SERVING once it serves. With etcd's stop-grpc-service-on-defrag (3.5.13+; supervised
members run with it, see member_settings.py) it says NOT_SERVING while it defragments, when it
would hold every request until the end: a client that follows this sends its requests to
another member meanwhile.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import trio
from grpclib.client import Channel
from grpclib.const import Cardinality

from supervisor.aio import pump_asyncio_iterator

from .client import EtcdClient, sole_error
from .transport import Endpoint

HEALTH_WATCH_METHOD = "/grpc.health.v1.Health/Watch"
_STATUS_FIELD_KEY = 0x08  # field 1, varint: HealthCheckResponse.status
_SERVING = 1


class HealthCheckRequest:
    """The whole server's health (service ""): the empty message."""

    def SerializeToString(self) -> bytes:
        return b""


class HealthCheckResponse:
    """Only whether the status is SERVING (statuses are below 128: a one-byte varint)."""

    __slots__ = ("serving",)

    def __init__(self, serving: bool) -> None:
        self.serving = serving

    @classmethod
    def FromString(cls, data: bytes) -> HealthCheckResponse:
        status = data[1] if len(data) >= 2 and data[0] == _STATUS_FIELD_KEY else 0
        return cls(status == _SERVING)


async def follow_serving(client: EtcdClient, url: str, report: Callable[[bool], None]) -> None:
    """Report the member's health (True: SERVING) at once and at every change, until the stream
    ends; an unreachable member raises EtcdError."""
    endpoint = Endpoint.parse(url)

    async def statuses(channel: Channel) -> AsyncIterator[bool]:
        async with channel.request(
            HEALTH_WATCH_METHOD, Cardinality.UNARY_STREAM, HealthCheckRequest, HealthCheckResponse
        ) as stream:
            await stream.send_message(HealthCheckRequest(), end=True)
            async for response in stream:
                yield response.serving

    send, receive = trio.open_memory_channel[bool](8)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump_asyncio_iterator, client.stream_of(endpoint, statuses), send)
            async with receive:
                async for serving in receive:
                    report(serving)
    except BaseExceptionGroup as group:
        raise sole_error(group) from None

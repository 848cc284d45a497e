"""supervisor.aio against real loopback servers: aiohttp over HTTP and grpclib over HTTP/2.

Real I/O, so the real clock: no autojump here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest
import trio
from aiohttp import web
from grpclib.client import Channel
from grpclib.health.service import Health
from grpclib.health.v1.health_grpc import HealthStub
from grpclib.health.v1.health_pb2 import HealthCheckRequest, HealthCheckResponse
from grpclib.server import Server

from supervisor.aio import (
    enter_asyncio,
    open_asyncio_loop,
    pump_asyncio_iterator,
    run_asyncio,
    running_in_asyncio_loop,
)


async def test_aiohttp_request_against_a_loopback_server() -> None:
    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"path": request.path, "query": request.query.get("q")})

    app = web.Application()
    app.router.add_get("/hello", hello)
    runner = web.AppRunner(app)

    async with open_asyncio_loop():
        assert running_in_asyncio_loop()
        await run_asyncio(runner.setup)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await run_asyncio(site.start)
        try:
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

            async def fetch(session: aiohttp.ClientSession) -> tuple[int, object]:
                # aiohttp's timeout needs a current asyncio task: this runs in one.
                url = f"http://127.0.0.1:{port}/hello"
                timeout = aiohttp.ClientTimeout(total=10)
                async with session.get(url, params={"q": "x"}, timeout=timeout) as response:
                    return response.status, await response.json()

            with trio.fail_after(20):
                async with enter_asyncio(aiohttp.ClientSession()) as session:
                    status, body = await run_asyncio(fetch, session)
        finally:
            await run_asyncio(runner.cleanup)
    assert (status, body) == (200, {"path": "/hello", "query": "x"})
    assert not running_in_asyncio_loop()


async def test_grpclib_health_check_against_a_loopback_server() -> None:
    async def make_server() -> Server:
        # grpclib binds the running loop at construction: asyncio objects are born in asyncio.
        return Server([Health()])

    async with open_asyncio_loop():
        server = await run_asyncio(make_server)
        await run_asyncio(server.start, "127.0.0.1", 0)
        try:
            port = server._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

            async def check() -> int:
                channel = Channel("127.0.0.1", port)
                try:
                    reply = await HealthStub(channel).Check(HealthCheckRequest(), timeout=10)
                    return int(reply.status)
                finally:
                    channel.close()

            with trio.fail_after(20):
                status = await run_asyncio(check)
        finally:
            server.close()
            await run_asyncio(server.wait_closed)
    assert status == HealthCheckResponse.SERVING


async def test_an_exception_handler_report_does_not_end_the_loop_block(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="supervisor.aio")
    async with open_asyncio_loop() as loop:
        loop.call_exception_handler({"message": "stray callback failed", "exception": ValueError("stray")})

        async def orphan() -> None:
            raise RuntimeError("nobody awaits me")

        def spawn_orphan() -> None:
            # An unretrieved task exception: asyncio reports it to the exception handler.
            loop.create_task(orphan()).add_done_callback(
                lambda t: loop.call_exception_handler(
                    {"message": "task exception was never retrieved", "exception": t.exception()}
                )
            )

        loop.call_soon(spawn_orphan)
        await trio.sleep(0.2)

        # The block is still alive and still runs asyncio code.
        async def still_here() -> str:
            await asyncio.sleep(0.01)
            return "still here"

        assert await run_asyncio(still_here) == "still here"
    messages = [r.getMessage() for r in caplog.records if r.name == "supervisor.aio"]
    assert "asyncio reported: stray callback failed" in messages
    assert "asyncio reported: task exception was never retrieved" in messages


async def test_pump_asyncio_iterator_delivers_every_item_then_closes() -> None:
    async def numbers() -> AsyncIterator[int]:
        for i in range(50):
            await asyncio.sleep(0)
            yield i

    send, receive = trio.open_memory_channel[int](2)  # small bound: backpressure is exercised
    got: list[int] = []
    async with open_asyncio_loop(), trio.open_nursery() as nursery:
        nursery.start_soon(pump_asyncio_iterator, numbers, send)
        async with receive:
            async for item in receive:
                got.append(item)
    assert got == list(range(50))

"""The channel pool against real etcd: no connection is left for the garbage collector, and a
connection whose peer went silent is given up."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import trio

from proto.etcd import etcdserverpb as pb
from supervisor.aio import run_asyncio
from supervisor.etcd.client import open_etcd_client
from supervisor.etcd.errors import EtcdTimeout
from supervisor.etcd.transport import ChannelPool, Endpoint, failure, invoke
from tests.harness.etcd import EtcdCluster
from tests.harness.relay import SilentRelay


async def test_a_channel_dropped_while_a_call_connects_is_closed_after_the_call(
    one_member: EtcdCluster, asyncio_loop: None
) -> None:
    # The member left the endpoints (set_endpoints) while a probe of it was connecting: the
    # connection it made after the drop must be closed by the call, or grpclib closes it from
    # its __del__ wherever the garbage collector runs, which breaks the trio-asyncio bridge.
    pool = ChannelPool(None)
    endpoint = Endpoint.parse(one_member.endpoints[0])
    used = []

    async def status(channel):  # type: ignore[no-untyped-def]
        used.append(channel)
        pool.drop(endpoint.url)
        return await pb.MaintenanceStub(channel).status(pb.StatusRequest(), timeout=5)

    answer = await run_asyncio(invoke, pool, endpoint, status)
    assert answer.header.member_id
    assert used[0]._protocol is None  # closed, not left connected
    pool.close()


async def test_a_member_reached_again_after_its_connection_went_silent(
    one_member: EtcdCluster, asyncio_loop: None
) -> None:
    # A member's pod is replaced: the old address is gone without a FIN or RST, and the
    # connection to it would swallow every call for the kernel's quarter of an hour.
    relay = SilentRelay(urlsplit(one_member.endpoints[0]).port or 0)
    async with trio.open_nursery() as nursery:
        await nursery.start(relay.serve)
        url = f"http://127.0.0.1:{relay.port}"
        async with open_etcd_client([url], call_timeout=1.0) as client:
            member = (await client.status(url)).member_id
            relay.silence_existing()
            with pytest.raises(EtcdTimeout):
                await client.status(url)
            assert (await client.status(url)).member_id == member  # over a new connection
            # The same when the caller gives up first (a probe's deadline is shorter than a call's).
            relay.silence_existing()
            with trio.move_on_after(0.5) as waited:
                await client.status(url)
            assert waited.cancelled_caught
            assert (await client.status(url)).member_id == member
        nursery.cancel_scope.cancel()


def test_a_timeout_gives_the_channel_up_only_when_nothing_else_runs_on_it() -> None:
    # A probe that times out beside a defragmentation (or a watch) of the same member must not
    # cut that call off; alone, it starts the next call on a new connection.
    pool = ChannelPool(None)
    endpoint = Endpoint.parse("http://127.0.0.1:1")
    with pool.borrowed(endpoint) as running, pool.borrowed(endpoint) as probe:
        assert probe is running
        assert isinstance(failure(TimeoutError(), endpoint, pool, probe), EtcdTimeout)
        assert pool.get(endpoint) is probe
    with pool.borrowed(endpoint) as probe:
        assert isinstance(failure(TimeoutError(), endpoint, pool, probe), EtcdTimeout)
        assert pool.get(endpoint) is not probe
    pool.close()

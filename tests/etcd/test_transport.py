"""The channel pool against real etcd: no connection is left for the garbage collector."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from proto.etcd import etcdserverpb as pb
from supervisor.aio import run_asyncio
from supervisor.etcd.transport import ChannelPool, Endpoint, invoke
from tests.harness.etcd import EtcdBinaries, EtcdCluster, running_cluster


@pytest.fixture(scope="module")
def cluster(binaries: EtcdBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(binaries, tmp_path_factory.mktemp("transport"), size=1) as cluster:
        yield cluster


async def test_a_channel_dropped_while_a_call_connects_is_closed_after_the_call(
    cluster: EtcdCluster, asyncio_loop: None
) -> None:
    # The member left the endpoints (set_endpoints) while a probe of it was connecting: the
    # connection it made after the drop must be closed by the call, or grpclib closes it from
    # its __del__ wherever the garbage collector runs, which breaks the trio-asyncio bridge.
    pool = ChannelPool(None)
    endpoint = Endpoint.parse(cluster.endpoints[0])
    used = []

    async def status(channel):  # type: ignore[no-untyped-def]
        used.append(channel)
        pool.drop(endpoint.url)
        return await pb.MaintenanceStub(channel).status(pb.StatusRequest(), timeout=5)

    answer = await run_asyncio(invoke, pool, endpoint, status)
    assert answer.header.member_id
    assert used[0]._protocol is None  # closed, not left connected
    pool.close()

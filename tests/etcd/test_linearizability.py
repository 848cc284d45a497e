"""A concurrent client workload against a real 3-member cluster whose leader is SIGKILLed and
restarted halfway: what the clients saw must still be linearizable (porcupine says so).
On the tier's etcd versions, and on the newest release built by `make etcd-versions`."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from supervisor.etcd import open_etcd_client
from tests.harness.etcd import EtcdBinaries, EtcdCluster, running_cluster
from tests.harness.etcd_versions import built_or_skip, pinned
from tests.harness.history import KvWorkload, checker_or_skip


@pytest.fixture(scope="module")
def cluster(binaries: EtcdBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(binaries, tmp_path_factory.mktemp("linearizability"), size=3) as cluster:
        yield cluster


async def test_history_through_a_leader_kill_is_linearizable(
    cluster: EtcdCluster, tmp_path: Path, asyncio_loop: None
) -> None:
    await leader_kill_under_workload(cluster, tmp_path)


@pytest.mark.parametrize("minor", ["3.6"])
async def test_history_through_a_leader_kill_is_linearizable_on_a_built_release(
    minor: str, tmp_path: Path, asyncio_loop: None
) -> None:
    binaries = built_or_skip(pinned(minor))
    with running_cluster(binaries, tmp_path / "etcd", size=3) as cluster:
        await leader_kill_under_workload(cluster, tmp_path)


async def leader_kill_under_workload(cluster: EtcdCluster, tmp_path: Path) -> None:
    checker_or_skip()  # before the cluster work, not after it
    workload = KvWorkload(endpoints=list(cluster.endpoints))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(workload.run)
        await workload.wait_for_more(150)

        async with open_etcd_client(cluster.endpoints) as client:
            leader = cluster.member((await client.leader()).client_urls[0])
        leader.kill(signal.SIGKILL)
        await workload.wait_for_more(150)  # the survivors elect a leader and serve
        leader.restart()
        await trio.to_thread.run_sync(cluster.wait_healthy)
        await workload.wait_for_more(150)
        nursery.cancel_scope.cancel()

    result = await workload.check(tmp_path)
    print(result.report)  # how many operations, how many puts of unknown outcome
    assert result.ok, result.report
    assert result.operations >= 450


async def test_the_workload_stops_at_its_bounds(cluster: EtcdCluster, asyncio_loop: None) -> None:
    counted = KvWorkload(endpoints=list(cluster.endpoints), max_operations=40)
    with trio.fail_after(30):
        history = await counted.run()
    # Each client checks the bound before its next operation.
    assert 40 <= len(history.operations) < 40 + counted.clients
    with pytest.raises(RuntimeError, match="stopped after"):
        await counted.wait_for_more(1)

    timed = KvWorkload(endpoints=list(cluster.endpoints))
    started = trio.current_time()
    await timed.run(duration=1.0)
    assert trio.current_time() - started < 3.0
    assert timed.acknowledged > 0

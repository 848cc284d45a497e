"""Defragmentation and the NOSPACE alarm against real single-member clusters."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from supervisor.etcd import Alarm, AlarmKind, NoSpace, open_etcd_client
from supervisor.etcd.member_settings import defrag_settings
from supervisor.etcd.serving import follow_serving
from tests.harness.etcd import EtcdBinaries, running_cluster
from tests.harness.etcd_versions import built_or_skip, pinned
from tests.harness.poll import eventually

VALUE = b"v" * 64 * 1024


async def test_defragment_shrinks_the_database(
    binaries: EtcdBinaries, tmp_path: Path, asyncio_loop: None
) -> None:
    with running_cluster(binaries, tmp_path, size=1) as cluster:
        url = cluster.endpoints[0]
        async with open_etcd_client(cluster.endpoints) as client:
            for i in range(150):  # ~10 MB of values
                await client.put(f"/defrag/{i:04d}".encode(), VALUE)
            await client.delete(b"/defrag/", b"/defrag0")
            revision = await client.put(b"/defrag-marker", b"x")
            await client.compact(revision, physical=True)
            before = await client.status(url)
            await client.defragment(url)
            after = await client.status(url)
    assert before.db_size > 8 * 1024 * 1024
    assert after.db_size < before.db_size / 4
    assert after.db_size_in_use <= after.db_size


async def test_nospace_alarm_is_typed_and_can_be_cleared(
    binaries: EtcdBinaries, tmp_path: Path, asyncio_loop: None
) -> None:
    quota = 4 * 1024 * 1024
    with running_cluster(
        binaries, tmp_path, size=1, extra_args=[f"--quota-backend-bytes={quota}"]
    ) as cluster:
        url = cluster.endpoints[0]
        async with open_etcd_client(cluster.endpoints) as client:
            with pytest.raises(NoSpace):
                for i in range(200):
                    await client.put(f"/fill/{i:04d}".encode(), VALUE)
            alarms = await client.alarms()
            member_id = (await client.status(url)).member_id
            assert alarms == [Alarm(member_id=member_id, kind=AlarmKind.NOSPACE)]
            assert any("NOSPACE" in e for e in (await client.status(url)).errors)
            with pytest.raises(NoSpace):
                await client.put(b"/after-alarm", b"x")

            # The way out an operator (or the supervisor) takes: free, compact, defragment, disarm.
            await client.delete(b"/fill/", b"/fill0")
            revision = await client.current_revision()
            await client.compact(revision)
            await client.defragment(url)
            cleared = await client.disarm(alarms[0])
            assert cleared == alarms
            assert await client.alarms() == []
            with trio.fail_after(10):
                await client.put(b"/after-disarm", b"ok")
            assert await client.get(b"/after-disarm") == b"ok"


@pytest.mark.parametrize("minor", ["3.5", "3.6", "3.7"])
async def test_a_member_says_not_serving_on_grpc_health_while_it_defragments(
    minor: str, tmp_path: Path, asyncio_loop: None
) -> None:
    binaries = built_or_skip(pinned(minor))
    flags = [f"--{flag}={value}" for flag, value in defrag_settings(binaries.version)]
    with running_cluster(binaries, tmp_path, size=1, extra_args=flags) as cluster:
        url = cluster.endpoints[0]
        seen: list[bool] = []
        async with open_etcd_client(cluster.endpoints, call_timeout=30.0) as client:
            for i in range(300):  # ~20 MB of history, then compacted: a defrag with work to do
                await client.put(f"/defrag/{i % 10}".encode(), VALUE)
            await client.compact(await client.current_revision())
            async with trio.open_nursery() as nursery:
                nursery.start_soon(follow_serving, client, url, seen.append)
                await eventually(lambda: seen, within=10, every=0.01, what="a first answer")
                await client.defragment(url)
                await eventually(lambda: seen[-1] is True, within=10, every=0.01, what="serving again")
                nursery.cancel_scope.cancel()
    assert seen[0] is True and False in seen[1:], seen

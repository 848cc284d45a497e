"""The Watch RPC against a real 3-member cluster: every change from a revision on, exactly once
and in order, through the death of the member serving it; progress notifications on request;
a compaction that overtakes the watch is reported, not papered over."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
import trio

from supervisor.etcd import Compare, EtcdClient, EtcdError, Put, open_etcd_client
from supervisor.etcd.watch import EventKind, WatchBatch, WatchCompacted, open_watch
from tests.harness.etcd import EtcdBinaries, EtcdCluster, running_cluster
from tests.harness.poll import accepted


@pytest.fixture(scope="module")
def cluster(binaries: EtcdBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(binaries, tmp_path_factory.mktemp("watch"), size=3) as cluster:
        yield cluster


async def create(client: EtcdClient, key: bytes, value: bytes) -> int:
    """Put a new key exactly once, through a leader election: a create-only transaction retried
    until etcd answers; if an earlier attempt did apply, the key's own revision is the answer."""

    async def once() -> int:
        result = await client.txn(compare=[Compare.version(key, "==", 0)], success=[Put(key, value)])
        if result.succeeded:
            return result.revision
        (kv,) = await client.range(key)
        return kv.mod_revision

    return await accepted(once, refused=(EtcdError,), within=30, what=f"creating {key!r}")


async def collect(watch, until_revision: int, into: list[WatchBatch]) -> None:
    with trio.fail_after(30):
        async for batch in watch:
            into.append(batch)
            if batch.revision >= until_revision:
                return


async def test_watch_resumes_from_its_last_revision_when_its_member_dies(
    cluster: EtcdCluster, asyncio_loop: None
) -> None:
    async with open_etcd_client(cluster.endpoints, call_timeout=3.0) as client:
        revisions = [await create(client, f"/w/{i:03d}".encode(), b"v%d" % i) for i in range(10)]
        deleted = await client.delete(b"/w/005")
        assert deleted == 1
        # From the fourth write on: history already written comes first.
        async with open_watch(client, b"/w/", b"/w0", start_revision=revisions[3]) as watch:
            got: list[WatchBatch] = []
            head = await client.current_revision()
            await collect(watch, head, got)
            serving = cluster.member(watch.statistics.endpoint)
            serving.kill(signal.SIGKILL)  # the member the watch is on, maybe the leader
            try:
                later = []
                for i in range(10, 30):
                    later.append(await create(client, f"/w/{i:03d}".encode(), b"v%d" % i))
                await collect(watch, later[-1], got)
            finally:
                serving.restart()
            assert watch.statistics.reconnects >= 1
            assert watch.statistics.endpoint != serving.client_url
    events = [e for b in got for e in b.events]
    keys = [(e.kind, e.kv.key) for e in events]
    expected = [(EventKind.PUT, f"/w/{i:03d}".encode()) for i in range(3, 10)]
    expected += [(EventKind.DELETE, b"/w/005")]
    expected += [(EventKind.PUT, f"/w/{i:03d}".encode()) for i in range(10, 30)]
    assert keys == expected  # each change once, in order, across the reconnect
    assert [e.revision for e in events] == sorted({e.revision for e in events})
    assert events[0].revision == revisions[3] and events[-1].kv.value == b"v29"
    cluster.wait_healthy()


async def test_a_watch_moved_off_a_frozen_member_resumes_on_another_from_its_last_revision(
    cluster: EtcdCluster, asyncio_loop: None
) -> None:
    """A frozen member (SIGSTOP) keeps its connection open: the stream neither fails nor
    delivers. move_to_another_member() is how its caller gets the history from another one."""
    async with open_etcd_client(cluster.endpoints, call_timeout=3.0) as client:
        first = await create(client, b"/f/000", b"v0")
        async with open_watch(client, b"/f/", b"/f0", start_revision=first) as watch:
            got: list[WatchBatch] = []
            await collect(watch, first, got)
            frozen = cluster.member(watch.statistics.endpoint)
            frozen.kill(signal.SIGSTOP)
            try:
                client.set_endpoints([u for u in cluster.endpoints if u != frozen.client_url])
                later = [await create(client, b"/f/%03d" % i, b"v%d" % i) for i in range(1, 20)]
                assert watch.move_to_another_member() == frozen.client_url
                await collect(watch, later[-1], got)
                assert watch.statistics.endpoint != frozen.client_url
            finally:
                frozen.kill(signal.SIGCONT)
            assert watch.statistics.moves == 1
    events = [e for b in got for e in b.events]
    assert [e.kv.key for e in events] == [b"/f/%03d" % i for i in range(20)]  # each once, in order
    cluster.wait_healthy()


async def test_progress_on_request_and_compaction_overtaking_the_watch(
    cluster: EtcdCluster, asyncio_loop: None
) -> None:
    async with open_etcd_client(cluster.endpoints, call_timeout=3.0) as client:
        first = await client.put(b"/p/a", b"1")
        await client.put(b"/other", b"x")  # outside the range: only progress can say it passed
        head = await client.put(b"/other", b"y")
        async with open_watch(client, b"/p/", b"/p0", start_revision=first) as watch:
            batch = await anext(watch)
            assert [e.kv.key for e in batch.events] == [b"/p/a"]
            with trio.fail_after(10):
                while watch.revision < head:
                    await watch.request_progress()
                    with trio.move_on_after(0.5):
                        batch = await anext(watch)
            assert batch.progress and batch.revision >= head and watch.revision >= head
            # Nothing new since: the answer names the same revision, and still arrives (it is
            # how a caller tells a quiet range from a stream that went silent).
            await watch.request_progress()
            with trio.fail_after(10):
                again = await anext(watch)
            assert again.progress and again.revision == batch.revision
        # A watch whose progress answers must not move it on (the follower's, on the whole
        # keyspace, where etcd 3.4 may answer before the events below): alive, not advanced.
        async with open_watch(client, b"/p/", b"/p0", start_revision=first, progress_advances=False) as still:
            assert [e.kv.key for e in (await anext(still)).events] == [b"/p/a"]
            await still.request_progress()
            with trio.fail_after(10):
                heard = await anext(still)
            assert heard.progress and heard.revision == first and still.revision == first
        await client.compact(head)
        async with open_watch(client, b"/p/", b"/p0", start_revision=first) as watch:
            with pytest.raises(WatchCompacted) as compacted:
                with trio.fail_after(10):
                    await anext(watch)
    assert compacted.value.compact_revision == head

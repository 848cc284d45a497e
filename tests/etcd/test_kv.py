"""KV, leases, status, hashes and failover against a real 3-member cluster (shared by the module)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
import trio

from supervisor.etcd import (
    Compacted,
    Compare,
    Delete,
    EtcdConnectionError,
    EtcdTimeout,
    Get,
    LeaseExists,
    Put,
    open_etcd_client,
)
from tests.harness.etcd import EtcdBinaries, EtcdCluster, running_cluster
from tests.harness.poll import eventually


@pytest.fixture(scope="module")
def cluster(binaries: EtcdBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(binaries, tmp_path_factory.mktemp("kv"), size=3) as cluster:
        yield cluster


async def test_put_get_range_delete(cluster: EtcdCluster, asyncio_loop: None) -> None:
    async with open_etcd_client(cluster.endpoints) as client:
        first = await client.put(b"/kv/a", b"1")
        second = await client.put(b"/kv/b", b"2")
        assert second > first
        assert await client.get(b"/kv/a") == b"1"
        assert await client.get(b"/kv/missing") is None
        found = await client.range(b"/kv/", b"/kv0")
        assert [(kv.key, kv.value) for kv in found] == [(b"/kv/a", b"1"), (b"/kv/b", b"2")]
        assert found[1].mod_revision == second
        assert [kv.key for kv in await client.range(b"/kv/", b"/kv0", limit=1)] == [b"/kv/a"]
        assert await client.delete(b"/kv/", b"/kv0") == 2
        assert await client.range(b"/kv/", b"/kv0", serializable=True) == []
    # What we wrote is what etcdctl reads: the encoding is etcd's own.
    await client_put_is_visible_to_etcdctl(cluster)


async def client_put_is_visible_to_etcdctl(cluster: EtcdCluster) -> None:
    async with open_etcd_client(cluster.endpoints) as client:
        await client.put(b"/kv/ctl", b"hello")
    assert cluster.etcdctl("get", "/kv/ctl", "--print-value-only").strip() == "hello"


async def test_txn_compare_and_swap(cluster: EtcdCluster, asyncio_loop: None) -> None:
    async with open_etcd_client(cluster.endpoints) as client:
        create = await client.txn(
            compare=[Compare.version(b"/txn/lock", "==", 0)],
            success=[Put(b"/txn/lock", b"owner-1"), Get(b"/txn/lock")],
            failure=[Get(b"/txn/lock")],
        )
        assert create.succeeded
        assert create.responses[1].kvs[0].value == b"owner-1"

        again = await client.txn(
            compare=[Compare.version(b"/txn/lock", "==", 0)],
            success=[Put(b"/txn/lock", b"owner-2")],
            failure=[Get(b"/txn/lock")],
        )
        assert not again.succeeded
        assert again.responses[0].kvs[0].value == b"owner-1"

        swap = await client.txn(
            compare=[Compare.value(b"/txn/lock", "==", b"owner-1")],
            success=[Delete(b"/txn/lock")],
        )
        assert swap.succeeded and swap.responses[0].deleted == 1
        assert await client.get(b"/txn/lock") is None


async def test_lease_attaches_and_revoke_deletes(cluster: EtcdCluster, asyncio_loop: None) -> None:
    async with open_etcd_client(cluster.endpoints) as client:
        lease = await client.lease_grant(60)
        assert lease > 0
        await client.put(b"/lease/k", b"v", lease=lease)
        assert (await client.range(b"/lease/k"))[0].lease == lease
        await client.lease_revoke(lease)
        assert await client.get(b"/lease/k") is None


async def test_lease_with_a_chosen_id_is_listed_refreshed_and_then_gone(
    cluster: EtcdCluster, asyncio_loop: None
) -> None:
    """What restoring leases needs: a grant with the ID of the original lease (a second one
    refused), its granted TTL, the list of leases, a refresh, and a gone lease told apart."""
    async with open_etcd_client(cluster.endpoints) as client:
        lease = 0x15E_A5E
        assert await client.lease_grant(30, lease_id=lease) == lease
        with pytest.raises(LeaseExists):
            await client.lease_grant(30, lease_id=lease)
        await client.put(b"/lease-id/k", b"v", lease=lease)
        assert await client.lease_granted_ttl(lease) == 30
        assert lease in await client.lease_ids()
        other = await client.lease_grant(20)
        refreshed = await client.lease_keep_alive([lease, other, lease + 1])
        assert refreshed[lease] == 30 and refreshed[other] == 20 and refreshed[lease + 1] == 0
        await client.lease_revoke(lease)
        assert await client.lease_granted_ttl(lease) is None
        assert lease not in await client.lease_ids()
        assert await client.get(b"/lease-id/k") is None


async def test_compact_then_old_revision_is_gone(cluster: EtcdCluster, asyncio_loop: None) -> None:
    async with open_etcd_client(cluster.endpoints) as client:
        old = await client.put(b"/compact/k", b"1")
        latest = await client.put(b"/compact/k", b"2")
        await client.compact(latest)
        with pytest.raises(Compacted):
            await client.compact(old)


async def test_status_and_hash_agree_across_members(cluster: EtcdCluster, asyncio_loop: None) -> None:
    async with open_etcd_client(cluster.endpoints) as client:
        revision = await client.put(b"/hash/k", b"v")
        statuses = [await client.status(url) for url in cluster.endpoints]
        assert len({s.member_id for s in statuses}) == 3
        assert len({s.leader_id for s in statuses}) == 1
        assert sum(s.is_leader for s in statuses) == 1
        assert all(s.version == cluster.binaries.version for s in statuses)
        ids = {m.id for m in await client.member_list()}
        assert {s.member_id for s in statuses} == ids
        hashes = set()
        for url in cluster.endpoints:
            hashed = await eventually(  # a follower may not have applied `revision` yet
                lambda url=url: client.hash_kv(url, revision),
                lambda hashed: hashed.revision >= revision,
                within=20,
                what=f"HashKV of {url} at revision {revision}",
            )
            hashes.add(hashed.hash)
        assert len(hashes) == 1


async def test_failover_when_a_member_dies(cluster: EtcdCluster, asyncio_loop: None) -> None:
    victim = cluster.members[0]
    async with open_etcd_client(cluster.endpoints, call_timeout=10) as client:
        await client.put(b"/failover/k", b"before")
        assert client.endpoints[0] == victim.client_url  # the calls above went to the victim
        victim.kill(signal.SIGKILL)
        try:
            for i in range(5):
                await client.put(b"/failover/k", f"after-{i}".encode())
            assert await client.get(b"/failover/k") == b"after-4"
            assert client.endpoints[0] != victim.client_url
            with pytest.raises((EtcdConnectionError, EtcdTimeout)):
                await client.status(victim.client_url)
        finally:
            victim.restart()
            await trio.to_thread.run_sync(cluster.wait_healthy)

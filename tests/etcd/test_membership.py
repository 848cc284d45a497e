"""Membership changes against a real cluster: learners, promotion, removal, leader moves."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import trio

from actors import errors as domain
from supervisor.etcd import (
    BadLeaderTransferee,
    EtcdClient,
    EtcdError,
    LearnerNotReady,
    MemberNotFound,
    NoLeader,
    ProposalDropped,
    TlsFiles,
    TooManyLearners,
    UnhealthyCluster,
    open_etcd_client,
)
from supervisor.etcd.admin import EtcdAdminAdapter
from tests.harness.etcd import EtcdBinaries, EtcdCluster, running_cluster
from tests.harness.poll import accepted, eventually

T = TypeVar("T")


async def patiently(change: Callable[[], Awaitable[T]], seconds: float = 20) -> T:
    """etcd refuses membership changes as "unhealthy" until a new leader has seen its peers for 5s."""
    return await accepted(
        change, refused=(UnhealthyCluster,), within=seconds, every=0.25, what="a membership change"
    )


@pytest.fixture(scope="module")
def cluster(binaries: EtcdBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(binaries, tmp_path_factory.mktemp("members"), size=3) as cluster:
        yield cluster


async def test_move_leader(cluster: EtcdCluster, asyncio_loop: None) -> None:
    async with open_etcd_client(cluster.endpoints, call_timeout=10) as client:
        leader = await client.leader()
        target = next(m for m in await client.member_list() if m.id != leader.id and not m.is_learner)
        await client.move_leader(target.id)
        await eventually(
            client.leader, lambda leader: leader.id == target.id, within=10, what="the new leader"
        )
        with pytest.raises(BadLeaderTransferee):
            await client.move_leader(0xDEAD)


async def test_a_write_the_leader_refuses_while_handing_over_is_proposal_dropped_and_not_applied(
    cluster: EtcdCluster, asyncio_loop: None
) -> None:
    """While a leader hands over, raft refuses every new proposal: the client says so by type,
    which tells a caller the write never entered the log (safe to send again)."""
    async with open_etcd_client(cluster.endpoints, call_timeout=10) as client:
        leader = await client.leader()
        target = next(m for m in await client.member_list() if m.id != leader.id and not m.is_learner)
        # A paused transferee holds the hand-over open for a whole election timeout (1 s), the
        # window in which a leader drops proposals; on loopback it otherwise lasts milliseconds.
        paused = next(m for m in cluster.members if m.name == target.name)
        paused.kill(signal.SIGSTOP)
        try:
            async with open_etcd_client(list(leader.client_urls), call_timeout=5) as on_leader:
                dropped = await _write_while_moving(on_leader, target.id)
        finally:
            paused.kill(signal.SIGCONT)
        assert dropped is not None, "no write was refused while leadership was being handed over"
        # The refused put never entered the log: no member has it.
        found = await accepted(lambda: client.get(dropped), refused=(NoLeader,), within=10, what="a read")
        assert found is None


async def _write_while_moving(on_leader: EtcdClient, target_id: int) -> bytes | None:
    """Put one key after another to the leader while it hands over to ``target_id``: the key of
    the first put refused as ProposalDropped (None: none was)."""
    moving = trio.Event()

    async def move() -> None:
        moving.set()
        try:
            await on_leader.move_leader(target_id, time_limit=3)
        except EtcdError:
            pass  # the paused transferee never takes over: raft gives up on it, as meant
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(move)
        await moving.wait()
        for n in range(10_000):
            key = f"/handover/{n}".encode()
            try:
                await on_leader.put(key, b"x")
            except ProposalDropped:
                nursery.cancel_scope.cancel()
                return key
            await trio.sleep(0.01)
    return None


async def test_learner_is_added_promoted_once_caught_up_and_removed(
    cluster: EtcdCluster, asyncio_loop: None
) -> None:
    joining = cluster.prepare_member()
    async with open_etcd_client(cluster.endpoints, call_timeout=10) as client:
        learner = await patiently(lambda: client.member_add([joining.peer_url], learner=True))
        assert learner.is_learner and learner.peer_urls == (joining.peer_url,)
        assert not learner.started

        # Not started, so nowhere near the leader's log: etcd refuses the promotion.
        with pytest.raises(LearnerNotReady):
            await client.member_promote(learner.id)
        # One learner at a time (etcd's default --max-learners is 1).
        spare = cluster.prepare_member()
        with pytest.raises(TooManyLearners):
            await client.member_add([spare.peer_url], learner=True)

        await trio.to_thread.run_sync(lambda: cluster.start_joining(joining))
        members = await accepted(
            lambda: client.member_promote(learner.id),
            refused=(LearnerNotReady,),
            within=30,
            every=0.2,
            what="the learner's promotion",
        )
        promoted = next(m for m in members if m.id == learner.id)
        assert not promoted.is_learner
        await trio.to_thread.run_sync(cluster.wait_healthy)
        client.set_endpoints(cluster.endpoints)
        assert (await client.status(joining.client_url)).member_id == learner.id

        # Back to three: remove the newcomer again.
        remaining = await patiently(lambda: client.member_remove(learner.id))
        assert learner.id not in {m.id for m in remaining}
        assert len(remaining) == 3
        cluster.forget(joining)
        client.set_endpoints(cluster.endpoints)
        with pytest.raises(MemberNotFound):
            await client.member_remove(learner.id)
        assert len(await client.member_list()) == 3


async def test_member_update_changes_peer_urls(cluster: EtcdCluster, asyncio_loop: None) -> None:
    async with open_etcd_client(cluster.endpoints, call_timeout=10) as client:
        added = await patiently(lambda: client.member_add([cluster.prepare_member().peer_url], learner=True))
        try:
            moved = cluster.prepare_member().peer_url
            members = await client.member_update(added.id, [moved])
            assert next(m for m in members if m.id == added.id).peer_urls == (moved,)
        finally:
            await patiently(lambda: client.member_remove(added.id))


async def test_a_promotion_with_auth_on_goes_to_the_leader_though_a_follower_was_used_last(
    binaries: EtcdBinaries, tmp_path: Path, asyncio_loop: None
) -> None:
    """With auth on, a follower forwards a promotion to its leader without the caller's identity
    and the leader refuses it, so the call hangs until its deadline (etcd issue 20757). The
    supervisor's adapter asks the leader, which its caller names first, even when the member it
    used last is a follower."""
    with running_cluster(binaries, tmp_path, size=2, tls=True, peer_tls=True) as cluster:
        assert cluster.tls is not None
        tls = TlsFiles(cluster.tls.ca, cluster.tls.client_cert, cluster.tls.client_key)
        async with open_etcd_client(cluster.endpoints, tls=tls) as root:  # CN root: the root user
            await root.role_add("root")
            await root.user_add_without_password("root")
            await root.user_grant_role("root", "root")
            await root.auth_enable()
            joining = cluster.prepare_member()
            await patiently(lambda: root.member_add([joining.peer_url], learner=True))
        await trio.to_thread.run_sync(lambda: cluster.start_joining(joining))
        admin = EtcdAdminAdapter(tls=tls, call_timeout=3.0)
        try:
            leader_id = (await admin.member_health(cluster.endpoints[0])).leader_id
            members = await admin.member_list(cluster.endpoints)
            leader = next(m.client_urls[0] for m in members if m.id == leader_id)
            follower = next(m.client_urls[0] for m in members if m.id != leader_id and not m.is_learner)
            learner_id = next(m.id for m in members if m.is_learner)
            await admin.member_list([follower])  # the follower is now the member last used
            await accepted(
                lambda: admin.promote([leader, follower], learner_id),
                refused=(domain.LearnerNotReady,),  # the adapter's error: the actors' own
                within=30,
                every=0.2,
                what="the learner's promotion",
            )
            assert not next(m for m in await admin.member_list([leader]) if m.id == learner_id).is_learner
        finally:
            await admin.aclose()
        cluster.forget(joining)

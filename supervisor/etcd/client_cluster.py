"""Membership and maintenance: EtcdClient's calls about the members themselves (adding,
promoting and removing them, their status, leadership, alarms, defragmentation, hashes,
snapshots)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import trio

from proto.etcd import etcdserverpb as pb

from . import wire
from .client_base import EtcdConnection, retry_anywhere, retry_if_unapplied, sole_error
from .errors import EtcdError, EtcdTimeout, NoLeader, SnapshotIntegrityError
from .records import Alarm, EndpointStatus, HashKV, Member, SnapshotResult
from .snapshot import SnapshotDigest
from .snapshot_stream import read_snapshot
from .transport import Endpoint, Metadata

# Snapshot pieces (about 1 MiB each) read but not yet hashed.
SNAPSHOT_QUEUE = 8


class ClusterCalls(EtcdConnection):
    """Who the members are, and their upkeep."""

    # ---- membership

    async def member_list(self, *, linearizable: bool = False) -> list[Member]:
        """All members; linearizable (etcd 3.5+) asks the leader's view instead of the local one."""
        request = pb.MemberListRequest(linearizable=linearizable)
        response = await self._call(
            lambda ch, md, t: pb.ClusterStub(ch).member_list(request, timeout=t, metadata=md)
        )
        return [wire.member(m) for m in response.members]

    async def member_add(self, peer_urls: Sequence[str], *, learner: bool = False) -> Member:
        request = pb.MemberAddRequest(peer_ur_ls=list(peer_urls), is_learner=learner)
        response = await self._call(
            lambda ch, md, t: pb.ClusterStub(ch).member_add(request, timeout=t, metadata=md),
            retry=retry_if_unapplied,
        )
        return wire.member(response.member)

    async def member_promote(self, member_id: int) -> list[Member]:
        """Make a caught-up learner a voter (LearnerNotReady until it has caught up)."""
        request = pb.MemberPromoteRequest(id=member_id)
        response = await self._call(
            lambda ch, md, t: pb.ClusterStub(ch).member_promote(request, timeout=t, metadata=md),
            retry=retry_if_unapplied,
        )
        return [wire.member(m) for m in response.members]

    async def member_remove(self, member_id: int) -> list[Member]:
        request = pb.MemberRemoveRequest(id=member_id)
        response = await self._call(
            lambda ch, md, t: pb.ClusterStub(ch).member_remove(request, timeout=t, metadata=md),
            retry=retry_if_unapplied,
        )
        return [wire.member(m) for m in response.members]

    async def member_update(self, member_id: int, peer_urls: Sequence[str]) -> list[Member]:
        request = pb.MemberUpdateRequest(id=member_id, peer_ur_ls=list(peer_urls))
        response = await self._call(
            lambda ch, md, t: pb.ClusterStub(ch).member_update(request, timeout=t, metadata=md)
        )
        return [wire.member(m) for m in response.members]

    # ---- maintenance

    async def status(self, endpoint: str) -> EndpointStatus:
        """What the member behind ``endpoint`` reports about itself (no failover)."""
        response = await self._call(
            lambda ch, md, t: pb.MaintenanceStub(ch).status(pb.StatusRequest(), timeout=t, metadata=md),
            endpoint=endpoint,
        )
        return wire.endpoint_status(endpoint, response)

    async def downgrade(self, action: str, version: str = "") -> str:
        """etcd's downgrade API (3.6+): VALIDATE or ENABLE a downgrade of the cluster version to
        ``version``'s minor, or CANCEL one; returns the cluster version etcd answered with."""
        request = pb.DowngradeRequest(action=pb.DowngradeRequestDowngradeAction[action], version=version)
        response = await self._call(
            lambda ch, md, t: pb.MaintenanceStub(ch).downgrade(request, timeout=t, metadata=md)
        )
        return response.version

    async def statuses(self, endpoints: Sequence[str] | None = None) -> dict[str, EndpointStatus | EtcdError]:
        """The status of every endpoint, concurrently; a failed endpoint maps to its error."""
        results: dict[str, EndpointStatus | EtcdError] = {}

        async def one(url: str) -> None:
            try:
                results[url] = await self.status(url)
            except EtcdError as error:
                results[url] = error

        async with trio.open_nursery() as nursery:
            for url in endpoints or self.endpoints:
                nursery.start_soon(one, url)
        return results

    async def leader(self) -> Member:
        """The current leader, as the members see it (NoLeader if none does)."""
        leader_id = 0
        for result in (await self.statuses()).values():
            if isinstance(result, EndpointStatus) and result.leader_id:
                leader_id = result.leader_id
                break
        if not leader_id:
            raise NoLeader("no endpoint knows a leader")
        for member in await self.member_list():
            if member.id == leader_id:
                return member
        raise NoLeader(f"leader {leader_id:x} is not in the member list")

    async def move_leader(self, target_id: int, *, time_limit: float | None = None) -> None:
        """Hand the leadership to ``target_id``; the request must reach the current leader."""
        leader = await self.leader()
        if leader.id == target_id:
            return
        known = set(self.endpoints)
        urls = sorted(leader.client_urls, key=lambda url: url not in known)
        if not urls:
            raise NoLeader(f"leader {leader.id:x} publishes no client URL")
        request = pb.MoveLeaderRequest(target_id=target_id)
        await self._call(
            lambda ch, md, t: pb.MaintenanceStub(ch).move_leader(request, timeout=t, metadata=md),
            endpoint=urls[0],
            time_limit=time_limit,
        )

    async def defragment(self, endpoint: str, *, time_limit: float | None = None) -> None:
        """Defragment one member's backend; it blocks that member, so it can take a while."""
        await self._call(
            lambda ch, md, t: pb.MaintenanceStub(ch).defragment(
                pb.DefragmentRequest(), timeout=t, metadata=md
            ),
            endpoint=endpoint,
            time_limit=time_limit if time_limit is not None else max(self.call_timeout, 60.0),
        )

    async def alarms(self) -> list[Alarm]:
        request = wire.alarm_request(pb.AlarmRequestAlarmAction.GET)
        response = await self._call(
            lambda ch, md, t: pb.MaintenanceStub(ch).alarm(request, timeout=t, metadata=md)
        )
        return [a for a in (wire.alarm(m) for m in response.alarms) if a is not None]

    async def disarm(self, alarm: Alarm) -> list[Alarm]:
        """Clear one alarm; returns the alarms that were cleared."""
        request = wire.alarm_request(pb.AlarmRequestAlarmAction.DEACTIVATE, alarm)
        response = await self._call(
            lambda ch, md, t: pb.MaintenanceStub(ch).alarm(request, timeout=t, metadata=md)
        )
        return [a for a in (wire.alarm(m) for m in response.alarms) if a is not None]

    async def hash_kv(self, endpoint: str, revision: int = 0) -> HashKV:
        request = pb.HashKvRequest(revision=revision)
        response = await self._call(
            lambda ch, md, t: pb.MaintenanceStub(ch).hash_kv(request, timeout=t, metadata=md),
            endpoint=endpoint,
            time_limit=max(self.call_timeout, 30.0),
        )
        return wire.hash_kv(response)

    async def snapshot(
        self,
        sink: Callable[[bytes], Awaitable[None]],
        *,
        endpoint: str | None = None,
        time_limit: float = 600.0,
    ) -> SnapshotResult:
        """Stream a snapshot of one member's database into ``sink``.

        Without ``endpoint`` the endpoints are tried in turn, but only until the sink has
        received its first byte. Raises SnapshotIntegrityError when etcd's trailing sha256
        does not match (the sink then holds a damaged copy: discard it).
        """
        targets = [endpoint] if endpoint else list(self.endpoints)
        last_error: EtcdError | None = None
        deadline = trio.current_time() + time_limit
        for url in targets:
            digest = SnapshotDigest()
            try:
                revision = await self._snapshot_from(url, sink, digest, deadline)
            except EtcdError as error:
                if digest.size or not retry_anywhere(error) or endpoint:
                    raise
                last_error = error
                self._demote(url)
                continue
            result = digest.result(revision=revision, endpoint=url)
            if not result.verified:
                raise SnapshotIntegrityError(
                    f"snapshot sha256 mismatch after {result.size} bytes", endpoint=url
                )
            return result
        assert last_error is not None
        raise last_error

    async def _snapshot_from(
        self,
        url: str,
        sink: Callable[[bytes], Awaitable[None]],
        digest: SnapshotDigest,
        deadline: float,
    ) -> int:
        endpoint = Endpoint.parse(url)
        metadata: Metadata = {}
        if self._credentials is not None:
            token = await self._ensure_token(deadline)
            if token:
                metadata["token"] = token
        remaining = max(deadline - trio.current_time(), 0.001)
        send, receive = trio.open_memory_channel[bytes](SNAPSHOT_QUEUE)

        async def hash_pieces() -> None:
            # In its own task, so the stream goes on while a piece is hashed; in a worker thread
            # (hashlib drops the GIL on large updates), so hashing costs the trio thread nothing.
            async with receive:
                async for piece in receive:
                    await trio.to_thread.run_sync(digest.update, piece)

        async def hashed(piece: bytes) -> None:
            await send.send(piece)
            await sink(piece)

        with trio.move_on_after(remaining + 1.0) as scope:
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(hash_pieces)
                    async with send:
                        revision = await read_snapshot(
                            self._pool, endpoint, hashed, metadata=metadata, deadline_seconds=remaining
                        )
            except BaseExceptionGroup as group:
                raise sole_error(group) from None
        if scope.cancelled_caught:
            raise EtcdTimeout("snapshot did not finish in time", endpoint=url)
        return revision

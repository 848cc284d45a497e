"""The etcd admin client the actors use: trio-flavoured, failover across endpoints, typed errors.

Call it from trio code running inside ``supervisor.aio.open_asyncio_loop()``. Each call has a
deadline (``call_timeout`` unless the method says otherwise) that covers all its attempts:
on unavailability the next endpoint is tried with what is left of it. Calls that concern one
member (status, defragment, hash, snapshot) are aimed at that member's endpoint only.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio
from grpclib.client import Channel

from proto.etcd import etcdserverpb as pb
from supervisor.aio import run_asyncio
from supervisor.runtime import leaf_exceptions

from . import wire
from .errors import (
    AuthNotEnabled,
    EtcdConnectionError,
    EtcdError,
    EtcdTimeout,
    EtcdUnavailable,
    InvalidAuthToken,
    LeaderChanged,
    LeaseNotFound,
    NoLeader,
    NotAuthenticated,
    NotSupportedForLearner,
    ProposalDropped,
    RequestTimedOut,
    ServerStopped,
    SnapshotIntegrityError,
)
from .records import (
    Alarm,
    EndpointStatus,
    HashKV,
    KeyValue,
    Member,
    PermissionKind,
    SnapshotResult,
    TxnResult,
)
from .snapshot import SnapshotDigest
from .snapshot_stream import read_snapshot
from .tls import TlsFiles
from .transport import ChannelPool, Endpoint, Metadata, failure, invoke
from .txn import Compare, TxnOp

T = TypeVar("T")

# Snapshot pieces (about 1 MiB each) read but not yet hashed.
_SNAPSHOT_QUEUE = 8


# A read (it changes nothing, so repeating it is safe) goes round the endpoints this many times,
# pausing ROUND_PAUSE, then twice that, in between: a leader change refuses it everywhere at once.
READ_ROUNDS = 3
ROUND_PAUSE = 0.05


def _retry_anywhere(error: EtcdError) -> bool:
    """For reads and idempotent writes: any unavailability is worth another endpoint."""
    return isinstance(error, EtcdUnavailable)


def _retry_if_unapplied(error: EtcdError) -> bool:
    """For changes that must not apply twice: only failures that prove etcd did not take it."""
    # RequestTimedOut and LeaderChanged leave the outcome unknown: the caller decides.
    if isinstance(error, RequestTimedOut | LeaderChanged | EtcdTimeout):
        return False
    return isinstance(
        error, EtcdConnectionError | NoLeader | NotSupportedForLearner | ProposalDropped | ServerStopped
    )


class EtcdClient:
    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        tls: TlsFiles | None = None,
        credentials: tuple[str, str] | None = None,
        call_timeout: float = 5.0,
    ) -> None:
        self._endpoints: list[Endpoint] = []
        self._pool = ChannelPool(tls)
        self._credentials = credentials
        self._token: str | None = None
        self._token_generation = 0
        self._auth_lock = trio.Lock()
        self.call_timeout = call_timeout
        self.set_endpoints(endpoints)

    # ---- endpoints

    @property
    def endpoints(self) -> tuple[str, ...]:
        return tuple(e.url for e in self._endpoints)

    def set_endpoints(self, endpoints: Sequence[str]) -> None:
        """Replace the endpoints the client fails over between (members come and go)."""
        parsed = [Endpoint.parse(url) for url in endpoints]
        if not parsed:
            raise ValueError("at least one endpoint is needed")
        # Keep the working endpoint first if it survives the change.
        current = self._endpoints[0].url if self._endpoints else None
        parsed.sort(key=lambda e: e.url != current)
        self._endpoints = parsed

    def _demote(self, url: str) -> None:
        """Move a failing endpoint to the back so later calls start with one that works."""
        for i, endpoint in enumerate(self._endpoints):
            if endpoint.url == url:
                self._endpoints.append(self._endpoints.pop(i))
                return

    # ---- for streams (supervisor/etcd/watch.py)

    async def stream_token(self) -> str | None:
        """The auth token a long-lived stream sends, when the client authenticates."""
        if self._credentials is None:
            return None
        return await self._ensure_token(trio.current_time() + self.call_timeout)

    def stream_of(
        self, endpoint: Endpoint, make: Callable[[Channel], AsyncIterator[T]]
    ) -> Callable[[], AsyncIterator[T]]:
        """An asyncio iterator over `make(channel)` on the endpoint, failures as typed errors."""
        return lambda: _translated(self._pool, endpoint, make)

    async def aclose(self) -> None:
        async def close() -> None:
            self._pool.close()

        await run_asyncio(close)

    # ---- the call machinery

    async def _call(
        self,
        call: Callable[[Channel, Metadata, float], Awaitable[T]],
        *,
        endpoint: str | None = None,
        time_limit: float | None = None,
        retry: Callable[[EtcdError], bool] = _retry_anywhere,
        authenticated: bool = True,
        rounds: int = 1,
    ) -> T:
        """Run ``call(channel, metadata, seconds_left)`` on one endpoint after another until one answers.

        ``time_limit`` (default ``call_timeout``) bounds all attempts together. ``rounds`` > 1
        goes round the endpoints again after a short pause, for calls that are safe to repeat:
        while leadership moves, every member can refuse a linearizable read for a moment.
        """
        budget = self.call_timeout if time_limit is None else time_limit
        deadline = trio.current_time() + budget
        targets = [Endpoint.parse(endpoint)] if endpoint else list(self._endpoints)
        last_error: EtcdError | None = None
        for round_ in range(rounds):
            if round_:
                pause = ROUND_PAUSE * 2 ** (round_ - 1)
                await trio.sleep(min(pause, max(0.0, deadline - trio.current_time())))
            for attempt, target in enumerate(targets):
                remaining = deadline - trio.current_time()
                if remaining <= 0:
                    break
                # A black-holed endpoint must not eat the whole deadline: leave the others a share.
                share = remaining / (len(targets) - attempt)
                try:
                    return await self._attempt(target, call, share, authenticated)
                except EtcdError as error:
                    if not retry(error) or endpoint:
                        raise
                    last_error = error
                    self._demote(target.url)
        if last_error is not None:
            raise last_error
        raise EtcdTimeout(f"no endpoint answered within {budget:.1f}s")

    async def _attempt(
        self,
        endpoint: Endpoint,
        call: Callable[[Channel, Metadata, float], Awaitable[T]],
        seconds: float,
        authenticated: bool,
    ) -> T:
        deadline = trio.current_time() + seconds
        for first_try in (True, False):
            metadata: Metadata = {}
            generation = self._token_generation
            if authenticated and self._credentials is not None:
                token = await self._ensure_token(deadline)
                if token:
                    metadata["token"] = token
            remaining = max(deadline - trio.current_time(), 0.001)

            async def bound(channel: Channel, md: Metadata = metadata, seconds: float = remaining) -> T:
                return await call(channel, md, seconds)

            # The grpclib deadline travels to etcd; the trio one also bounds connecting.
            with trio.move_on_after(remaining + 0.5) as scope:
                try:
                    return await run_asyncio(invoke, self._pool, endpoint, bound)
                except (InvalidAuthToken, NotAuthenticated):
                    if not (first_try and authenticated and self._credentials is not None):
                        raise
                    await self._reauthenticate(generation)
                    continue
            if scope.cancelled_caught:
                raise EtcdTimeout(f"no answer within {seconds:.1f}s", endpoint=endpoint.url)
        raise AssertionError("unreachable")

    async def _ensure_token(self, deadline: float) -> str | None:
        if self._token is None and self._token_generation == 0:
            await self._reauthenticate(0, deadline)
        return self._token

    async def _reauthenticate(self, seen_generation: int, deadline: float | None = None) -> None:
        """Fetch a fresh token, once for all the callers that found the old one invalid."""
        assert self._credentials is not None
        name, password = self._credentials
        async with self._auth_lock:
            if self._token_generation != seen_generation:
                return  # another task already did it
            time_limit = None if deadline is None else max(deadline - trio.current_time(), 0.001)
            try:
                response = await self._call(
                    lambda ch, md, t: pb.AuthStub(ch).authenticate(
                        pb.AuthenticateRequest(name=name, password=password), timeout=t
                    ),
                    time_limit=time_limit,
                    authenticated=False,
                )
                self._token = response.token
            except AuthNotEnabled:
                self._token = None  # nothing to authenticate against (yet)
            self._token_generation += 1

    # ---- KV

    async def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        """Store ``value`` at ``key``; returns the store revision of the write."""
        request = pb.PutRequest(key=key, value=value, lease=lease)
        response = await self._call(lambda ch, md, t: pb.KvStub(ch).put(request, timeout=t, metadata=md))
        return int(response.header.revision)

    async def get(self, key: bytes) -> bytes | None:
        found = await self.range(key)
        return found[0].value if found else None

    async def range(
        self,
        key: bytes,
        range_end: bytes = b"",
        *,
        limit: int = 0,
        serializable: bool = False,
        revision: int = 0,
    ) -> list[KeyValue]:
        """The keys as they are (`revision` 0) or were at `revision` (Compacted once it is gone)."""
        request = pb.RangeRequest(
            key=key, range_end=range_end, limit=limit, serializable=serializable, revision=revision
        )
        response = await self._call(
            lambda ch, md, t: pb.KvStub(ch).range(request, timeout=t, metadata=md), rounds=READ_ROUNDS
        )
        return [wire.key_value(kv) for kv in response.kvs]

    async def delete(self, key: bytes, range_end: bytes = b"") -> int:
        """Delete ``key`` (or the range up to ``range_end``); returns how many keys went."""
        request = pb.DeleteRangeRequest(key=key, range_end=range_end)
        response = await self._call(
            lambda ch, md, t: pb.KvStub(ch).delete_range(request, timeout=t, metadata=md)
        )
        return int(response.deleted)

    async def txn(
        self,
        *,
        compare: Sequence[Compare] = (),
        success: Sequence[TxnOp] = (),
        failure: Sequence[TxnOp] = (),
    ) -> TxnResult:
        request = wire.txn_request(compare, success, failure)
        response = await self._call(
            lambda ch, md, t: pb.KvStub(ch).txn(request, timeout=t, metadata=md), retry=_retry_if_unapplied
        )
        return wire.txn_result(response)

    async def compact(self, revision: int, *, physical: bool = True) -> None:
        request = pb.CompactionRequest(revision=revision, physical=physical)
        await self._call(lambda ch, md, t: pb.KvStub(ch).compact(request, timeout=t, metadata=md))

    async def current_revision(self) -> int:
        request = pb.RangeRequest(key=b"\0", count_only=True)
        response = await self._call(lambda ch, md, t: pb.KvStub(ch).range(request, timeout=t, metadata=md))
        return int(response.header.revision)

    # ---- leases

    async def lease_grant(self, ttl: int, *, lease_id: int = 0) -> int:
        """A new lease of `ttl` seconds (etcd raises a TTL below its minimum to it); `lease_id`
        asks for that ID (LeaseExists when it is taken), 0 lets etcd choose."""
        request = pb.LeaseGrantRequest(ttl=ttl, id=lease_id)
        response = await self._call(
            lambda ch, md, t: pb.LeaseStub(ch).lease_grant(request, timeout=t, metadata=md),
            retry=_retry_if_unapplied,
        )
        if response.error:
            raise EtcdError(f"lease grant refused: {response.error}")
        return int(response.id)

    async def lease_revoke(self, lease_id: int) -> None:
        request = pb.LeaseRevokeRequest(id=lease_id)
        await self._call(lambda ch, md, t: pb.LeaseStub(ch).lease_revoke(request, timeout=t, metadata=md))

    async def lease_granted_ttl(self, lease_id: int) -> int | None:
        """The TTL the lease was granted with; None when it is gone (expired or revoked)."""
        request = pb.LeaseTimeToLiveRequest(id=lease_id)
        try:
            response = await self._call(
                lambda ch, md, t: pb.LeaseStub(ch).lease_time_to_live(request, timeout=t, metadata=md),
                rounds=READ_ROUNDS,
            )
        except LeaseNotFound:  # what some versions answer instead of a TTL of -1
            return None
        return int(response.granted_ttl) if response.ttl >= 0 else None

    async def lease_ids(self) -> list[int]:
        """Every lease granted and not yet gone."""
        response = await self._call(
            lambda ch, md, t: pb.LeaseStub(ch).lease_leases(pb.LeaseLeasesRequest(), timeout=t, metadata=md),
            rounds=READ_ROUNDS,
        )
        return [int(lease.id) for lease in response.leases]

    async def lease_keep_alive(self, lease_ids: Sequence[int]) -> dict[int, int]:
        """Refresh each lease once, on one short stream: its TTL from now on, 0 when it is gone."""
        if not lease_ids:
            return {}
        requests = [pb.LeaseKeepAliveRequest(id=i) for i in lease_ids]

        async def round_trip(channel: Channel, md: Metadata, seconds: float) -> dict[int, int]:
            stub = pb.LeaseStub(channel)
            return {
                int(r.id): max(int(r.ttl), 0)
                async for r in stub.lease_keep_alive(requests, timeout=seconds, metadata=md)
            }

        return await self._call(round_trip)

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
            retry=_retry_if_unapplied,
        )
        return wire.member(response.member)

    async def member_promote(self, member_id: int) -> list[Member]:
        """Make a caught-up learner a voter (LearnerNotReady until it has caught up)."""
        request = pb.MemberPromoteRequest(id=member_id)
        response = await self._call(
            lambda ch, md, t: pb.ClusterStub(ch).member_promote(request, timeout=t, metadata=md),
            retry=_retry_if_unapplied,
        )
        return [wire.member(m) for m in response.members]

    async def member_remove(self, member_id: int) -> list[Member]:
        request = pb.MemberRemoveRequest(id=member_id)
        response = await self._call(
            lambda ch, md, t: pb.ClusterStub(ch).member_remove(request, timeout=t, metadata=md),
            retry=_retry_if_unapplied,
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
                if digest.size or not _retry_anywhere(error) or endpoint:
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
        send, receive = trio.open_memory_channel[bytes](_SNAPSHOT_QUEUE)

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

    # ---- authentication and authorisation

    async def auth_enable(self) -> None:
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).auth_enable(pb.AuthEnableRequest(), timeout=t, metadata=md)
        )

    async def auth_disable(self) -> None:
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).auth_disable(pb.AuthDisableRequest(), timeout=t, metadata=md)
        )

    async def user_add(self, name: str, password: str) -> None:
        request = pb.AuthUserAddRequest(name=name, password=password)
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).user_add(request, timeout=t, metadata=md),
            retry=_retry_if_unapplied,
        )

    async def user_delete(self, name: str) -> None:
        request = pb.AuthUserDeleteRequest(name=name)
        await self._call(lambda ch, md, t: pb.AuthStub(ch).user_delete(request, timeout=t, metadata=md))

    async def user_roles(self, name: str) -> tuple[str, ...]:
        request = pb.AuthUserGetRequest(name=name)
        response = await self._call(
            lambda ch, md, t: pb.AuthStub(ch).user_get(request, timeout=t, metadata=md)
        )
        return tuple(response.roles)

    async def role_add(self, name: str) -> None:
        request = pb.AuthRoleAddRequest(name=name)
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).role_add(request, timeout=t, metadata=md),
            retry=_retry_if_unapplied,
        )

    async def role_delete(self, name: str) -> None:
        request = pb.AuthRoleDeleteRequest(role=name)
        await self._call(lambda ch, md, t: pb.AuthStub(ch).role_delete(request, timeout=t, metadata=md))

    async def role_grant_permission(
        self,
        role: str,
        key: bytes,
        range_end: bytes = b"",
        *,
        kind: PermissionKind = PermissionKind.READWRITE,
    ) -> None:
        request = pb.AuthRoleGrantPermissionRequest(name=role, perm=wire.permission(kind, key, range_end))
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).role_grant_permission(request, timeout=t, metadata=md)
        )

    async def user_grant_role(self, user: str, role: str) -> None:
        request = pb.AuthUserGrantRoleRequest(user=user, role=role)
        await self._call(lambda ch, md, t: pb.AuthStub(ch).user_grant_role(request, timeout=t, metadata=md))


async def _translated(
    pool: ChannelPool, endpoint: Endpoint, make: Callable[[Channel], AsyncIterator[T]]
) -> AsyncIterator[T]:
    """An asyncio async iterator whose grpclib failures come out as typed errors."""
    with pool.borrowed(endpoint) as channel:
        iterator = make(channel)
        while True:
            try:
                item = await iterator.__anext__()
            except StopAsyncIteration:
                return
            except Exception as error:
                typed = failure(error, endpoint, pool, channel)
                if typed is None:
                    raise
                raise typed from error
            yield item


def sole_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The one real error inside a nursery's exception group (cancellations are its echoes)."""
    leaves = [e for e in leaf_exceptions(group) if not isinstance(e, trio.Cancelled)]
    typed = [e for e in leaves if isinstance(e, EtcdError)]
    if typed:
        return typed[0]
    if len(leaves) == 1:
        return leaves[0]
    return group


@asynccontextmanager
async def open_etcd_client(
    endpoints: Sequence[str],
    *,
    tls: TlsFiles | None = None,
    credentials: tuple[str, str] | None = None,
    call_timeout: float = 5.0,
) -> AsyncIterator[EtcdClient]:
    """An EtcdClient for the lifetime of the block (inside ``open_asyncio_loop``)."""
    if not math.isfinite(call_timeout) or call_timeout <= 0:
        raise ValueError("call_timeout must be a positive number of seconds")
    client = EtcdClient(endpoints, tls=tls, credentials=credentials, call_timeout=call_timeout)
    try:
        yield client
    finally:
        with trio.CancelScope(shield=True):
            await client.aclose()

"""The actors' EtcdAdmin port, over EtcdClient: etcd records and errors in domain terms.

One adapter per cluster (its TLS and credentials); the actors name the endpoints on every
call because members come and go, and the client fails over between them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

from actors import errors as domain
from actors.backup.deltas import Change, ChangeBatch, HistoryCompacted
from actors.backup.leases import LeaseTtls
from actors.backup.records import KvHash, SnapshotTaken
from actors.model import EtcdMember, MemberHealth
from supervisor.etcd import errors as etcd
from supervisor.etcd.client import EtcdClient
from supervisor.etcd.cluster_version import ClusterVersionReader
from supervisor.etcd.records import AlarmKind, Member
from supervisor.etcd.tls import TlsFiles
from supervisor.etcd.watch import EventKind, Watch, WatchBatch, WatchCompacted, WatchEvent, open_watch

T = TypeVar("T")

# Defragmenting rewrites the member's whole database file: seconds per few hundred MiB.
DEFRAG_TIME_LIMIT = 600.0

_TRANSLATION: tuple[tuple[type[etcd.EtcdError], type[domain.EtcdError]], ...] = (
    (etcd.LearnerNotReady, domain.LearnerNotReady),
    (etcd.MemberNotFound, domain.MemberNotFound),
    (etcd.UnhealthyCluster, domain.ClusterUnhealthy),
    (etcd.NotEnoughStartedMembers, domain.ClusterUnhealthy),
    (etcd.EtcdUnavailable, domain.EtcdUnavailable),
    (etcd.Compacted, domain.RevisionCompacted),
    (etcd.AuthError, domain.AuthRefused),
)


async def translated(call: Callable[[], Awaitable[T]]) -> T:
    try:
        return await call()
    except etcd.EtcdError as exc:
        for theirs, ours in _TRANSLATION:
            if isinstance(exc, theirs):
                raise ours(str(exc)) from exc
        raise domain.EtcdError(str(exc)) from exc


def _alarm_name(error: str) -> str | None:
    """ "NOSPACE" for a Status error that reports the NOSPACE alarm ("memberID:… alarm:NOSPACE").

    Only NOSPACE is taken out of the errors: a member under it serves reads and deletes. A
    CORRUPT alarm stays an error, so that member counts as unhealthy."""
    return "NOSPACE" if "alarm:NOSPACE" in error.replace(" ", "") else None


def _member(m: Member) -> EtcdMember:
    return EtcdMember(m.id, m.name, m.peer_urls, m.client_urls, m.is_learner)


class EtcdAdminAdapter:
    """Implements actors.ports.EtcdAdmin. Must be used inside the asyncio bridge; call aclose()."""

    def __init__(
        self,
        *,
        tls: TlsFiles | None = None,
        credentials: tuple[str, str] | None = None,
        call_timeout: float = 5.0,
    ) -> None:
        self._tls = tls
        self._credentials = credentials
        self._call_timeout = call_timeout
        self._client: EtcdClient | None = None
        self._versions = ClusterVersionReader(tls)

    def _aimed(self, endpoints: Sequence[str]) -> EtcdClient:
        if not endpoints:
            raise domain.EtcdUnavailable("no member to ask")
        if self._client is None:
            self._client = EtcdClient(
                endpoints, tls=self._tls, credentials=self._credentials, call_timeout=self._call_timeout
            )
        else:
            self._client.set_endpoints(endpoints)
        return self._client

    def _for_one(self, endpoint: str) -> EtcdClient:
        # A call aimed at one member leaves the client's endpoints alone: a watch on this
        # client fails over between them, and must not be left with that one member only.
        return self._aimed([endpoint]) if self._client is None else self._client

    @asynccontextmanager
    async def follow(self, endpoints: Sequence[str], start_revision: int) -> AsyncIterator[_History]:
        """actors.backup.deltas.HistorySource: every change of the whole keyspace from
        `start_revision` on. The watch shares this adapter's client, so it fails over to the
        members the actors name on their calls as membership changes."""
        client = self._aimed(endpoints)
        # Progress answers prove the watch alive but never move it on (etcd 3.4 may send one
        # before the events below it; every revision of the whole keyspace is an event anyway).
        async with open_watch(
            client, b"\0", b"\0", start_revision=start_revision, progress_advances=False
        ) as watch:
            yield _History(watch, client)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def member_list(self, endpoints: Sequence[str]) -> list[EtcdMember]:
        client = self._aimed(endpoints)
        return [_member(m) for m in await translated(client.member_list)]

    async def auth_enabled(self, endpoints: Sequence[str]) -> bool:
        client = self._aimed(endpoints)

        async def ask() -> bool:
            try:
                return await client.auth_status()
            except etcd.Unimplemented:  # etcd 3.4
                return await client.auth_status_by_authenticate()

        return await translated(ask)

    async def add_learner(self, endpoints: Sequence[str], peer_url: str) -> EtcdMember:
        client = self._aimed(endpoints)
        return _member(await translated(lambda: client.member_add([peer_url], learner=True)))

    async def promote(self, endpoints: Sequence[str], member_id: int) -> None:
        # Asked of the leader, which `endpoints` names first (Observed.endpoints), not of the
        # member this client last used: a follower forwards a promotion to its leader over the
        # peer port without the caller's identity, so with auth on the leader refuses it ("user
        # name is empty") and the call hangs until its deadline (etcd issue 20757; a client
        # certificate's identity is not forwarded by any release here).
        client = self._aimed(endpoints)
        client.set_endpoints(endpoints, in_this_order=True)
        await translated(lambda: client.member_promote(member_id))

    async def remove(self, endpoints: Sequence[str], member_id: int) -> None:
        client = self._aimed(endpoints)
        await translated(lambda: client.member_remove(member_id))

    async def move_leader(self, endpoints: Sequence[str], target_id: int) -> None:
        client = self._aimed(endpoints)
        await translated(lambda: client.move_leader(target_id))

    async def downgrade(self, endpoints: Sequence[str], action: str, version: str) -> str:
        client = self._aimed(endpoints)
        return await translated(lambda: client.downgrade(action, version))

    async def member_health(self, client_url: str) -> MemberHealth:
        client = self._for_one(client_url)
        s = await translated(lambda: client.status(client_url))
        # One member is asked per probe round: the leader, whose word the others follow.
        leads = s.leader_id != 0 and s.leader_id == s.member_id
        return MemberHealth(
            member_id=s.member_id,
            leader_id=s.leader_id,
            raft_index=s.raft_index,
            raft_applied_index=s.raft_applied_index,
            is_learner=s.is_learner,
            db_size=s.db_size,
            db_size_in_use=s.db_size_in_use,
            errors=tuple(e for e in s.errors if _alarm_name(e) is None),
            alarms=tuple(a for a in (_alarm_name(e) for e in s.errors) if a is not None),
            revision=s.revision,
            version=s.version,
            downgrade_target=s.downgrade_target,
            storage_version=s.storage_version,
            cluster_version=await self._versions.read(client_url) if leads else "",
        )

    async def compact(self, endpoints: Sequence[str], revision: int) -> None:
        client = self._aimed(endpoints)
        try:
            await translated(lambda: client.compact(revision))
        except domain.EtcdError as exc:
            if "compacted" not in str(exc):  # "required revision has been compacted": done already
                raise

    async def defragment(self, client_url: str) -> None:
        client = self._for_one(client_url)
        await translated(lambda: client.defragment(client_url, time_limit=DEFRAG_TIME_LIMIT))

    async def append_empty_entry(self, endpoints: Sequence[str]) -> None:
        await translated(self._aimed(endpoints).alarms)

    async def disarm_nospace(self, endpoints: Sequence[str]) -> int:
        client = self._aimed(endpoints)
        raised = [a for a in await translated(client.alarms) if a.kind is AlarmKind.NOSPACE]
        for alarm in raised:
            await translated(lambda alarm=alarm: client.disarm(alarm))  # type: ignore[misc]
        return len(raised)

    async def revision(self, endpoints: Sequence[str]) -> int:
        client = self._aimed(endpoints)
        return await translated(client.current_revision)

    async def snapshot(self, endpoint: str, sink: Callable[[bytes], Awaitable[None]]) -> SnapshotTaken:
        client = self._for_one(endpoint)
        taken = await translated(lambda: client.snapshot(sink, endpoint=endpoint))
        return SnapshotTaken(taken.size, taken.sha256, taken.revision, taken.endpoint)

    async def kv_hash(self, endpoint: str, revision: int) -> KvHash:
        client = self._for_one(endpoint)
        found = await translated(lambda: client.hash_kv(endpoint, revision))
        return KvHash(found.hash, found.revision, found.compact_revision)


class _History:
    """actors.backup.deltas.HistoryStream over a Watch of the whole keyspace; each put with a
    lease carries the TTL the lease was granted with (actors/backup/leases.py)."""

    def __init__(self, watch: Watch, client: EtcdClient) -> None:
        self._watch = watch
        self._client = client
        self._leases = LeaseTtls()
        self._held: WatchBatch | None = None  # received, its leases not all asked about yet

    def __aiter__(self) -> _History:
        return self

    async def __anext__(self) -> ChangeBatch:
        # Not an async generator: a caller may cancel a wait for the next batch (a period's
        # end) and wait again, which would end a generator for good. A batch whose leases
        # were being asked about when that happened is held, and finished on the next call.
        if self._held is None:
            try:
                self._held = await self._watch.__anext__()
            except WatchCompacted as exc:
                raise HistoryCompacted(exc.compact_revision) from exc
            except etcd.EtcdError as exc:
                raise domain.EtcdError(str(exc)) from exc
        changes = [_change(e) for e in self._held.events]
        for lease in self._leases.unknown(changes):
            self._leases.learn(lease, await self._granted_ttl(lease))
        batch = ChangeBatch(self._leases.stamp(changes), self._held.revision)
        self._held = None
        return batch

    async def _granted_ttl(self, lease: int) -> int | None:
        return await translated(lambda: self._client.lease_granted_ttl(lease))

    async def request_progress(self) -> None:
        await self._watch.request_progress()

    def move_to_another_member(self) -> str:
        return self._watch.move_to_another_member()


def _change(event: WatchEvent) -> Change:
    value = None if event.kind is EventKind.DELETE else event.kv.value
    return Change(event.revision, event.kv.key, value, event.kv.lease)

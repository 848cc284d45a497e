"""The delta-backup actor: a per-cluster child that follows the cluster's history between full
snapshots and writes every change to the store in chunks (spec.backup.deltaPeriod).

It starts from the newest full snapshot the backup actor reported (deltas without a base are
useless, so it waits for one) or from the end of the chunks already stored after it, whichever
is later, and watches the whole keyspace from the next revision on. Each period it writes the
changes delivered so far as one chunk (sooner when a chunk grows large). The watch moves between
members by itself when one fails (a member killed, a leader change); one that goes silent
without failing (a member frozen, or cut off by a network that drops packets) is found by
liveness: a watch quiet for a while is asked for progress, and one that answers nothing, not
even that, for DEAD_AFTER such requests is moved to another member, from the last revision it
delivered (the changes not yet written stay pending). A compaction that overtakes the watch
means changes were missed, so a new full backup is taken at once and the deltas start again
from its revision.

Each chunk may start a verification of the chain a recovery would use (delta_verify.py says
when and how); it runs beside the follower, and a chain that does not verify makes the follower
take a full backup at once, as after a compaction.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import attrs
import trio
from attrs import define

from actors.backup.copies import sync_chunks
from actors.backup.delta_verify import VERIFY_EVERY, ChainVerifier, Checkpoint, VerifyAsk, verification_due
from actors.backup.deltas import (
    Change,
    HistoryCompacted,
    HistorySource,
    Liveness,
    chunk_key,
    covered_to,
    deltas_prefix,
    encode_chunk,
    parse_chunk_key,
)
from actors.backup.encoded_store import unencoded
from actors.backup.job import BackupFailed, take_backup
from actors.backup.ports import BackupPorts
from actors.backup.source import snapshot_source
from actors.cluster_context import ChildFactory, ClusterContext, ServicesReported, nudge
from actors.errors import EtcdError, RevisionCompacted, StoreError
from actors.measurements import Measurement
from actors.model import BackupSpec, StoreSpec, duration_seconds
from actors.store_port import ObjectStore
from supervisor.backoff import Backoff
from supervisor.runtime import ChildSpec, leaf_exceptions

log = logging.getLogger(__name__)

# How often a cluster without deltaPeriod (or without a base yet) is looked at: often, so the
# deltas start from the first verified snapshot, not one taken while this one slept.
IDLE_LOOK = 1.0
# A chunk is written early once it holds this many changes, so memory stays bounded.
MAX_CHUNK_CHANGES = 10_000
RETRY = Backoff(initial=1.0, maximum=60.0, multiplier=2.0, jitter=0.1)
# A watch quiet this long (or a period, when shorter) is asked for progress; after DEAD_AFTER
# such intervals with nothing heard at all it is moved to another member. etcd answers a
# progress request at once, even on a quiet cluster: silence means the member is not there.
PROGRESS_EVERY = 5.0
DEAD_AFTER = 3
# While copies to the second site fail, they are tried again this often without a new chunk.
COPY_RETRY = 30.0


@define
class DeltaFollower:
    context: ClusterContext
    ports: BackupPorts
    history: HistorySource
    # The revision the latest full snapshot holds, as far as this follower knows.
    base: int = 0
    chunks_written: int = 0
    verify_every: float = VERIFY_EVERY  # at most this often (seconds) on the same base
    _checkpoint: Checkpoint | None = None  # the last verification asked for
    _chain: ChainVerifier | None = None
    _broken: str | None = None  # why the stored chain did not verify, until a full backup
    _copy_due: trio.Event = attrs.Factory(trio.Event)  # chunks written: copy them to the second site

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            if self.ports.verifier is not None:
                self._chain = ChainVerifier(
                    self.context, self.ports.verifier, self.ports.open_store, self._chain_broken
                )
                nursery.start_soon(self._chain.run)
            nursery.start_soon(self._copy_forever)
            await self._follow_forever()

    def _chain_broken(self, why: str) -> None:
        self._broken = why

    async def _follow_forever(self) -> None:
        failures = 0
        while True:
            spec = self.context.desired().resource.spec.backup
            if (
                spec is None
                or spec.delta_period is None
                or spec.store is None
                or self._hibernating()
                or not self._base_known()
            ):
                await trio.sleep(IDLE_LOOK)
                continue
            written = self.chunks_written
            try:
                if self.context.reports.deltas_reach < self.base:
                    # What a recovery from backup can use, even with no member up.
                    await self._stored_reach(spec)
                if self.context.feed.latest is None:
                    await trio.sleep(IDLE_LOOK)
                    continue
                try:
                    await self._follow(spec)
                except BaseExceptionGroup as group:  # the watch's nursery wraps what ended it
                    raise _sole(group) from None
                failures = 0
            except (HistoryCompacted, ChainBroken) as exc:
                await self._full_backup(spec, str(exc))
            except (EtcdError, StoreError, BackupFailed) as exc:
                # The backoff grows only while attempts get nowhere: one that wrote chunks worked.
                failures = 1 if self.chunks_written > written else failures + 1
                log.warning("delta backups of %s: %s", self.context.ref, exc)
                measured = exc.measured() if isinstance(exc, BackupFailed) else None  # a verification's end
                await self._event("DeltaBackupFailed", str(exc), warning=True, measured=measured)
                await trio.sleep(RETRY.base_delay(min(failures - 1, 10)))

    def _base_known(self) -> bool:
        # Only a verified snapshot's revision is exact: deltas start from one, so a restore can
        # always find a verified snapshot from which the chunks run without a gap.
        report = self.context.reports.backup
        last = report.status.last_successful_backup if report else None
        if last is not None and last.verified:
            self.base = max(self.base, last.revision)
        return self.base > 0

    async def _stored_reach(self, spec: BackupSpec) -> int:
        """How far the stored chunks reach from the base without a gap. It counts for a recovery
        from backup at once, before any watch works (a daemon restarted while every member is
        gone writes no new chunk, and the recovery waits for this; plan/recovery.py)."""
        async with self._store(spec) as store:
            stored = [
                c for o in await store.list(deltas_prefix(self.context.ref)) if (c := parse_chunk_key(o.key))
            ]
        reach = covered_to(stored, self.base)
        self.context.reports.deltas_reach = max(self.context.reports.deltas_reach, reach)
        return reach

    async def _follow(self, spec: BackupSpec) -> None:
        assert spec.store is not None and spec.delta_period is not None
        period = duration_seconds(spec.delta_period)
        start = await self._stored_reach(spec)
        observed = self.context.feed.latest
        assert observed is not None
        async with self.history.follow(observed.endpoints(), start + 1) as stream:
            batches = stream.__aiter__()
            pending: list[Change] = []
            covered = start
            now = trio.current_time()
            deadline = now + period
            live = Liveness(every=min(period, PROGRESS_EVERY), misses=DEAD_AFTER, heard_at=now)
            while self._unchanged(spec):
                if self._broken is not None:
                    raise ChainBroken(self._broken)
                with trio.move_on_at(min(deadline, live.next_look())):
                    while len(pending) < MAX_CHUNK_CHANGES:
                        batch = await batches.__anext__()
                        pending.extend(batch.changes)
                        covered = batch.revision
                        live.heard(trio.current_time())
                now = trio.current_time()
                if live.dead(now):
                    member = stream.move_to_another_member()
                    live.heard(now)  # a fresh start on the next member
                    log.warning(
                        "delta backups of %s: the watch on %s answered nothing for %.0fs;"
                        " resuming on another member after revision %d",
                        self.context.ref,
                        member,
                        DEAD_AFTER * live.every,
                        covered,
                    )
                elif now >= live.next_look():
                    await stream.request_progress()
                    live.asked(now)
                if now >= deadline or len(pending) >= MAX_CHUNK_CHANGES:
                    if covered > start:
                        await self._write(spec, start + 1, covered, pending)
                        start, pending = covered, []
                    if now >= deadline:
                        deadline = now + period
                await self._maybe_verify(spec, start)

    def _unchanged(self, spec: BackupSpec) -> bool:
        return self.context.desired().resource.spec.backup == spec and not self._hibernating()

    def _hibernating(self) -> bool:
        """spec.hibernate: the members stop, so nothing is followed until they are woken."""
        return self.context.desired().resource.spec.hibernate

    async def _write(self, spec: BackupSpec, first: int, last: int, changes: list[Change]) -> None:
        key = chunk_key(self.context.ref, first, last)
        async with self._store(spec) as store:
            await store.put_bytes(key, encode_chunk(changes))
        self.chunks_written += 1
        self.context.reports.deltas_reach = last  # for a recovery from backup (plan/recovery.py)
        log.info("delta backup %s: %d changes, revisions %d-%d", key, len(changes), first, last)
        self._copy_due.set()

    async def _copy_forever(self) -> None:
        """Copies to the second site beside the follower, so a slow or hanging second store
        never holds the watch up (a watch not read for long would be taken for a dead one).
        Woken by each chunk written; while the second site fails, also every COPY_RETRY, so it
        catches up even when no new chunk comes; and once at start (chunks a restarted daemon
        left uncopied)."""
        self._copy_due.set()
        while True:
            with trio.move_on_after(COPY_RETRY if self.context.reports.deltas_second_site else float("inf")):
                await self._copy_due.wait()
            self._copy_due = trio.Event()
            spec = self.context.desired().resource.spec.backup
            if spec is not None:
                await self._second_site_copy(spec)

    async def _second_site_copy(self, spec: BackupSpec) -> None:
        """Copy to spec.backup.copyTo the chunks it lacks (the new ones, and any an outage of
        the second site left behind), each verified there by sha256 (copies.py). A failure is
        reported (BackupHealthy SecondSiteFailing, an Event) and never fails the delta backup:
        the chunks are in the first store, and the next pass copies them."""
        reports = self.context.reports
        if spec.copy_to is None or spec.store is None or spec.delta_period is None:
            if reports.deltas_second_site:  # no second site (or deltas) any more: nothing can fail
                reports.deltas_second_site = ""
                nudge(self.context.handle, ServicesReported())
            return
        second = spec.copy_to.store
        try:
            async with self._store(spec.store) as first, self._store(second) as target:
                copied = await sync_chunks(unencoded(first), unencoded(target), self.context.ref)
        except StoreError as exc:
            failed = not reports.deltas_second_site
            reports.deltas_second_site = f"delta chunks to the second store {second.describe()}: {exc}"
            log.warning("delta backups of %s: %s", self.context.ref, reports.deltas_second_site)
            if failed:  # once per outage, not once per chunk
                await self._event("DeltaCopyFailed", reports.deltas_second_site, warning=True)
            nudge(self.context.handle, ServicesReported())
            return
        if reports.deltas_second_site:
            reports.deltas_second_site = ""
            nudge(self.context.handle, ServicesReported())
        if copied:
            await self._event(
                "DeltaBackupCopied",
                f"{len(copied)} delta chunks copied to {second.describe()} (up to {copied[-1].key}),"
                " each read back with its sha256",
            )

    async def _maybe_verify(self, spec: BackupSpec, reach: int) -> None:
        """When a verification of the stored chain up to `reach` is due (delta_verify.py), ask
        the source's HashKV there now, while it is not compacted, and hand both to the chain
        verifier. Looked at each time the follower wakes, so the last chunk before a quiet spell
        is verified too once its time comes."""
        chain, now = self._chain, trio.current_time()
        if chain is None or not spec.verify or reach <= self.base:
            return
        if not verification_due(self._checkpoint, self.base, reach, now, self.verify_every):
            return
        observed = self.context.feed.latest
        member = snapshot_source(observed) if observed is not None else None
        if member is None:
            return  # no healthy member to ask: the next chunk asks again
        try:
            source = await self.context.ports.admin.kv_hash(member, reach)
        except RevisionCompacted as exc:
            self._checkpoint = Checkpoint(self.base, reach, now)
            why = f"the deltas to revision {reach} are not verified: the source compacted it already ({exc})"
            await self._event("DeltaVerificationSkipped", why)
            return
        except EtcdError as exc:  # unavailable, or not there yet: the next chunk asks again
            log.info(
                "delta backups of %s: no HashKV at revision %d from %s: %s",
                self.context.ref,
                reach,
                member,
                exc,
            )
            return
        self._checkpoint = Checkpoint(self.base, reach, now)
        chain.ask(VerifyAsk(reach, source, member))

    async def _full_backup(self, spec: BackupSpec, why: str) -> None:
        await self._event("DeltaBackupRestarting", f"{why}: taking a full backup to start the deltas afresh")
        observed = self.context.feed.latest
        assert observed is not None and spec.store is not None
        async with self._store(spec) as store:
            verifier = self.ports.verifier if spec.verify else None
            outcome = await take_backup(
                observed, self.context.ports.admin, store, verifier=verifier, clock=self.ports.clock
            )
        if not outcome.verified:  # the deltas need an exact base (see _base_known)
            raise BackupFailed(f"{outcome.key}: not verified ({outcome.note or 'verify is off'})")
        self.base = max(self.base, outcome.revision)
        self._broken = None  # the deltas go on from a fresh verified base
        await self._event(
            "BackupSucceeded",
            f"{outcome.key}: full backup for the deltas at revision {outcome.revision}",
            measured=outcome.measured(),
        )

    @asynccontextmanager
    async def _store(self, where: BackupSpec | StoreSpec) -> AsyncIterator[ObjectStore]:
        """The store `where` names: a StoreSpec, or a BackupSpec's first store."""
        spec = where.store if isinstance(where, BackupSpec) else where
        assert spec is not None
        store = self.ports.open_store(spec)
        try:
            yield store
        finally:
            await store.aclose()

    async def _event(
        self, reason: str, message: str, *, warning: bool = False, measured: Measurement | None = None
    ) -> None:
        await self.context.ports.events.record(
            self.context.ref, reason=reason, message=message, warning=warning, measured=measured
        )


class ChainBroken(Exception):
    """The stored chain did not verify: a full backup must start the deltas afresh."""


def _sole(group: BaseExceptionGroup[BaseException]) -> BaseException:
    leaves = [e for e in leaf_exceptions(group) if not isinstance(e, trio.Cancelled)]
    return leaves[0] if len(leaves) == 1 else group


def delta_child(
    ports: BackupPorts,
    history: Callable[[ClusterContext], HistorySource | None],
    *,
    verify_every: float = VERIFY_EVERY,
) -> ChildFactory:
    """The per-cluster child for delta backups (idle unless spec.backup.deltaPeriod is set);
    `verify_every`: how far apart verifications of the stored chain are (delta_verify.py)."""

    def child(context: ClusterContext) -> ChildSpec:
        async def start(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            source = history(context)
            task_status.started()
            if source is None:
                await trio.sleep_forever()  # this runtime's admin cannot follow history
            follower = DeltaFollower(context, ports, source, verify_every=verify_every)  # type: ignore[arg-type]
            await follower.run()

        return ChildSpec("deltas", start, shutdown=5.0)

    return child

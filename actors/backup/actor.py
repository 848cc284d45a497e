"""The backup-schedule actor: a per-cluster child that takes scheduled and on-demand backups.

It wakes every few seconds, takes the oldest pending on-demand backup (an EtcdBackup, through
the BackupRequests port) if there is one, else asks the schedule (schedule.py) whether a
backup is due: one backup at a time, from what the cluster actor last observed (it never
observes on its own). A scheduled success resets the failure count and applies retention; a
failure is retried with backoff. An on-demand backup reports each step to its EtcdBackup's
status and is Failed after ON_DEMAND_ATTEMPTS attempts; retention never deletes it.
What it knows reaches the cluster's status through the tree's ServiceReports.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio
from attrs import frozen

from actors.backup.copies import sync_copies
from actors.backup.delta_retention import prune_deltas
from actors.backup.encoded_store import unencoded
from actors.backup.health import BackupReport, encoding_problem
from actors.backup.job import BackupFailed, BackupOutcome, take_backup
from actors.backup.locks import held_note, lock_days, split_locked
from actors.backup.ports import BackupPorts, BackupRequests
from actors.backup.retention import BackupRecord, expired
from actors.backup.source import metadata_key, scheduled, snapshot_of, taken_at
from actors.cluster_context import ChildFactory, ClusterContext, ServicesReported, nudge
from actors.errors import StoreError
from actors.measurements import BackupMeasured
from actors.model import (
    BackupPhase,
    BackupSpec,
    BackupStatus,
    EtcdBackup,
    EtcdBackupStatus,
    LastBackup,
    StoreSpec,
    duration_seconds,
)
from actors.schedule import due, utc
from actors.store_port import ObjectStore
from supervisor.backoff import Backoff
from supervisor.runtime import Actor, ChildSpec, Handle, Mailbox, run_actor

log = logging.getLogger(__name__)

# How often the schedule is looked at: cron slots are a minute apart.
WAKE_EVERY = 5.0
# A failed backup is tried again after 30 s, doubling up to 30 min, until it works.
RETRY = Backoff(initial=30.0, maximum=1800.0, multiplier=2.0, jitter=0.1)
# An on-demand backup is tried this many times (with the same backoff) before it is Failed.
ON_DEMAND_ATTEMPTS = 3


@frozen
class Wake:
    """Look at the schedule (a timer tick)."""


class BackupActor(Actor[Wake]):
    def __init__(self, context: ClusterContext, ports: BackupPorts, retry: Backoff = RETRY) -> None:
        self._context = context
        self._ports = ports
        self._retry = retry
        report = context.reports.backup
        self._status = report.status if report else BackupStatus()
        # Why the last copy to spec.backup.copyTo failed (""), and which backups retention keeps
        # because they are locked (""): both reach the BackupHealthy condition.
        self._second_site = report.second_site if report else ""
        self._held = report.held if report else ""
        # Start of the last scheduled backup; None until read back from the store.
        self._since: float | None = self._status.last_schedule_time
        self._retry_at = float("-inf")
        # On-demand backups that failed and wait to be tried again: attempts so far, and when.
        self._attempts: dict[str, int] = {}
        self._request_retry_at: dict[str, float] = {}
        self._rng = random.Random()

    async def handle(self, msg: Wake) -> None:
        await self._start_schedule()
        if self._context.feed.latest is None:  # the cluster actor has not looked yet
            return
        if self._context.desired().resource.spec.hibernate:
            # Hibernating: one final backup, then none (no member runs to take one from);
            # on-demand backups wait, pending, until the cluster is woken.
            await self._final()
            return
        if not await self._next_request():
            await self._scheduled()

    # --- the final backup of a hibernation (spec.hibernate, plan/hibernate.py) -----------------

    async def _final(self) -> None:
        spec = self._context.desired().resource.spec.backup
        observed = self._context.feed.latest
        if spec is None or spec.store is None or self._context.reports.final_backup is not None:
            return
        if observed is None or not observed.has_quorum() or trio.current_time() < self._retry_at:
            return
        now = self._ports.clock()
        try:
            async with self._store(spec.store) as store:
                outcome = await self._take(store, verify=spec.verify)
                if spec.verify and not outcome.verified:
                    raise BackupFailed(f"{outcome.key}: {outcome.note or 'not verified'}")
                await self._succeeded(spec, store, outcome, now)
        except (BackupFailed, StoreError) as exc:
            await self._failed(now, exc)
            return
        # Handed over last, once its status and Event are written: the members stop on it.
        self._context.reports.final_backup = _last(outcome)
        nudge(self._context.handle, ServicesReported())

    # --- on-demand backups (EtcdBackup), oldest first, one at a time ---------------------------

    async def _next_request(self) -> bool:
        """Take the oldest pending on-demand backup if its turn has come; whether one ran."""
        requests = self._ports.requests
        if requests is None:
            return False
        pending = await requests.pending(self._context.ref)
        if not pending or trio.current_time() < self._request_retry_at.get(pending[0].name, float("-inf")):
            return False
        await self._run_request(requests, pending[0])
        return True

    async def _run_request(self, requests: BackupRequests, request: EtcdBackup) -> None:
        spec = self._context.desired().resource.spec.backup
        store_spec = request.spec.store or (spec.store if spec else None)
        now = self._ports.clock()
        if store_spec is None:
            why = f"no store: set the EtcdBackup's spec.store, or spec.backup.store of {self._context.ref}"
            await self._request_failed(requests, request, now, why)
            return
        started = request.status.start_time or now
        if request.name not in self._attempts:
            await self._event("BackupStarted", f"on-demand backup {request.name} to {store_spec.describe()}")
        await requests.report(request, EtcdBackupStatus(BackupPhase.RUNNING, start_time=started))
        try:
            async with self._store(store_spec) as store:
                verify = spec.verify if spec else True
                outcome = await self._take(store, verify=verify, on_demand=request.name)
        except (BackupFailed, StoreError) as exc:
            await self._request_attempt_failed(requests, request, started, exc)
            return
        self._forget(request)
        status = EtcdBackupStatus(
            BackupPhase.SUCCEEDED, outcome.key, outcome.size, outcome.revision, outcome.sha256,
            outcome.verified, started, outcome.completed, _describe(outcome),
        )  # fmt: skip
        # The Event goes first: whoever sees the terminal phase finds the Event already recorded.
        await self._event(
            "BackupSucceeded", f"on-demand backup {request.name}: {_describe(outcome)}", outcome.measured()
        )
        await requests.report(request, status)
        self._report(attrs.evolve(self._status, last_successful_backup=_last(outcome)))
        # Copied like any backup; retention (which never deletes on-demand backups) is not run.
        await self._second_site_copy(spec, store_spec, now, prune=False)

    async def _request_attempt_failed(
        self, requests: BackupRequests, request: EtcdBackup, started: float, exc: Exception
    ) -> None:
        attempts = self._attempts.get(request.name, 0) + 1
        why, measured = str(exc), _measured(exc)
        if attempts >= ON_DEMAND_ATTEMPTS:
            await self._request_failed(
                requests, request, started, f"{attempts} attempts failed, the last: {why}", measured
            )
            return
        self._attempts[request.name] = attempts
        delay = self._retry.delay(attempts - 1, self._rng)
        self._request_retry_at[request.name] = trio.current_time() + delay
        message = f"attempt {attempts} failed: {why}; trying again in {delay:.0f}s"
        await requests.report(
            request, EtcdBackupStatus(BackupPhase.RUNNING, start_time=started, message=message)
        )
        await self._event(
            "BackupRetrying", f"on-demand backup {request.name}: {message}", measured, warning=True
        )

    async def _request_failed(
        self,
        requests: BackupRequests,
        request: EtcdBackup,
        started: float,
        why: str,
        measured: BackupMeasured | None = None,
    ) -> None:
        self._forget(request)
        now = self._ports.clock()
        status = EtcdBackupStatus(BackupPhase.FAILED, start_time=started, completion_time=now, message=why)
        await self._event("BackupFailed", f"on-demand backup {request.name}: {why}", measured, warning=True)
        await requests.report(request, status)

    def _forget(self, request: EtcdBackup) -> None:
        self._attempts.pop(request.name, None)
        self._request_retry_at.pop(request.name, None)

    # --- scheduled backups ---------------------------------------------------------------------

    async def _scheduled(self) -> None:
        spec = self._context.desired().resource.spec.backup
        if spec is None or spec.schedule is None or spec.store is None:
            return
        now = self._ports.clock()
        if self._since is None:  # the schedule was set after the actor started
            self._since = await self._look_back(spec.store) or now
        if trio.current_time() < self._retry_at or not due(spec.schedule, utc(self._since), utc(now)):
            return
        try:
            async with self._store(spec.store) as store:
                outcome = await self._take(store, verify=spec.verify)
                await self._succeeded(spec, store, outcome, now)
        except (BackupFailed, StoreError) as exc:
            await self._failed(now, exc)

    async def _take(self, store: ObjectStore, *, verify: bool, on_demand: str | None = None) -> BackupOutcome:
        observed = self._context.feed.latest
        assert observed is not None  # handle() waits for the cluster actor's first look
        verifier = self._ports.verifier if verify else None
        admin = self._context.ports.admin
        return await take_backup(
            observed, admin, store, verifier=verifier, on_demand=on_demand, clock=self._ports.clock
        )

    @asynccontextmanager
    async def _store(self, store_spec: StoreSpec) -> AsyncIterator[ObjectStore]:
        store = self._ports.open_store(store_spec)  # StoreError when its credentials are unusable
        try:
            yield store
        finally:
            await store.aclose()

    async def _succeeded(
        self, spec: BackupSpec, store: ObjectStore, outcome: BackupOutcome, now: float
    ) -> None:
        self._since = now
        self._report(BackupStatus(now, _last(outcome), 0))
        await self._event("BackupSucceeded", _describe(outcome), outcome.measured())
        assert spec.store is not None  # a backup was taken to it
        self._held = await self._apply_retention(spec, store, now, spec.store)
        await self._second_site_copy(spec, spec.store, now, prune=True)

    async def _second_site_copy(
        self, spec: BackupSpec | None, source: StoreSpec, now: float, *, prune: bool
    ) -> None:
        """Copy to spec.backup.copyTo what it lacks of `source`'s backups, verified there by
        sha256 (actors/backup/copies.py), then apply retention there too (`prune`). A failure
        is reported (BackupHealthy SecondSiteFailing, an Event) and fails nothing else: the
        next backup tries again, and copies what this one could not."""
        if spec is None or spec.copy_to is None:
            return
        second = spec.copy_to.store
        try:
            async with self._store(source) as first, self._store(second) as target:
                copied = await sync_copies(unencoded(first), unencoded(target), self._context.ref)
                # Told before retention runs there: its Events (BackupDeleted) come after the copies.
                for done in copied:
                    await self._event(
                        "BackupCopied",
                        f"{done.key}: copied to {second.describe()}, sha256 {done.sha256} read back",
                    )
                held = await self._apply_retention(spec, target, now, second) if prune else ""
        except StoreError as exc:
            self._second_site = f"the second store {second.describe()}: {exc}"
            log.warning("backup copy of %s failed: %s", self._context.ref, self._second_site)
            await self._event("BackupCopyFailed", self._second_site, warning=True)
        else:
            self._second_site = ""
            self._held = "; ".join(note for note in (self._held, held) if note)
        self._report(self._status)

    async def _failed(self, now: float, exc: Exception) -> None:
        why = str(exc)
        failures = self._status.consecutive_failures + 1
        self._retry_at = trio.current_time() + self._retry.delay(failures - 1, self._rng)
        self._report(
            BackupStatus(now, self._status.last_successful_backup, failures), why, encoding_problem(exc)
        )
        log.warning("backup of %s failed (%d in a row): %s", self._context.ref, failures, why)
        await self._event("BackupFailed", why, _measured(exc), warning=True)

    async def _apply_retention(
        self, spec: BackupSpec, store: ObjectStore, now: float, where: StoreSpec
    ) -> str:
        """Delete what retention says in `store` (the same rules in the first store and the
        second), except locked backups; returns what was kept because locked ("": none)."""
        keep, max_age = spec.retention.keep, spec.retention.max_age
        if (keep is None and max_age is None) or self._context.desired().resource.suspended:
            return ""  # suspended: backups are still taken, none deleted (the next success prunes)
        age = duration_seconds(max_age) if max_age else None
        doomed = expired(await self._records(store), keep=keep, max_age=age, now=now)
        deletable, locked = split_locked(doomed, now)
        for backup in deletable:
            await store.delete(backup.key)
            await store.delete(metadata_key(backup.key))
            await self._event(
                "BackupDeleted",
                f"{backup.key}: retention (keep {keep}, maxAge {max_age}) in {where.describe()}",
            )
        await self._prune_deltas(spec, store, now, where)
        note = held_note(locked, where.describe())
        if note:
            log.info("backups of %s: %s", self._context.ref, note)
        return note

    async def _prune_deltas(self, spec: BackupSpec, store: ObjectStore, now: float, where: StoreSpec) -> None:
        """After the snapshots, the delta chunks none of those kept can use (delta_retention.py)."""
        pruned = await prune_deltas(store, self._context.ref, lock_days=lock_days(where, spec), now=now)
        if pruned.deleted:
            first, last = pruned.deleted[0], pruned.deleted[-1]
            await self._event(
                "DeltaBackupsDeleted",
                f"{len(pruned.deleted)} delta chunks (revisions {first.first}-{last.last}) older than"
                f" the oldest verified backup kept, in {where.describe()}",
            )
        if pruned.locked:
            log.info(
                "delta backups of %s: %d chunks past use kept in %s: locked",
                self._context.ref, pruned.locked, where.describe(),
            )  # fmt: skip

    async def _records(self, store: ObjectStore, *, on_demand: bool = False) -> list[BackupRecord]:
        """The scheduled snapshots in the store (retention and the schedule look only at those);
        with `on_demand`, those of EtcdBackups too."""
        ref = self._context.ref
        wanted = snapshot_of if on_demand else scheduled
        snapshots = [o for o in await store.list(f"{ref.namespace}/{ref.name}/") if wanted(o.key, ref)]
        return [
            BackupRecord(o.key, taken_at(o.key, o.modified), *await _recorded(store, o.key))
            for o in snapshots
        ]

    async def _start_schedule(self) -> None:
        """Where the schedule counts from: the newest backup in the store, else this actor's
        start; not the cluster's first look, which may come many seconds later (a slot that
        falls in between would be missed)."""
        spec = self._context.desired().resource.spec.backup
        if self._since is None and spec is not None and spec.schedule is not None and spec.store is not None:
            self._since = await self._look_back(spec.store) or self._ports.clock()

    async def _look_back(self, store_spec: StoreSpec) -> float | None:
        """When the newest backup in the store was taken; and, when this actor knows of no
        successful backup (the daemon restarted: reports live in memory), the newest verified
        one becomes the last successful backup again, so the status, the BackupHealthy
        condition and a recovery from backup (actors/plan/recovery.py) know of it."""
        try:
            async with self._store(store_spec) as store:
                every = await self._records(store, on_demand=True)
                if self._status.last_successful_backup is None:
                    await self._recall(store, every)  # any verified snapshot will do, on-demand ones too
                records = [r for r in every if scheduled(r.key, self._context.ref)]
        except StoreError:
            return None  # the first attempt will say what is wrong with the store
        return max((r.taken_at for r in records), default=None)

    async def _recall(self, store: ObjectStore, records: list[BackupRecord]) -> None:
        newest = max((r for r in records if r.verified), key=lambda r: r.taken_at, default=None)
        if newest is None:
            return
        try:
            meta = json.loads(await store.get_bytes(metadata_key(newest.key)))
            last = LastBackup(
                newest.key,
                int(meta["revision"]),
                int(meta["sizeBytes"]),
                True,
                float(meta.get("completionTime") or newest.taken_at),
            )
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("backup %s has unreadable metadata, not recalled: %s", newest.key, exc)
            return
        self._report(attrs.evolve(self._status, last_successful_backup=last))

    def _report(self, status: BackupStatus, last_error: str = "", last_reason: str = "") -> None:
        self._status = status
        self._context.reports.backup = BackupReport(
            status, last_error, last_reason, self._second_site, self._held
        )
        nudge(self._context.handle, ServicesReported())

    async def _event(
        self, reason: str, message: str, measured: BackupMeasured | None = None, *, warning: bool = False
    ) -> None:
        ref = self._context.ref
        await self._context.ports.events.record(
            ref, reason=reason, message=message, warning=warning, measured=measured
        )


def _measured(exc: Exception) -> BackupMeasured | None:
    """A failed backup's numbers: how its verification ended, when that is why it failed."""
    return exc.measured() if isinstance(exc, BackupFailed) and exc.verification else None


def _last(outcome: BackupOutcome) -> LastBackup:
    return LastBackup(outcome.key, outcome.revision, outcome.size, outcome.verified, outcome.completed)


def _describe(outcome: BackupOutcome) -> str:
    verified = "verified" if outcome.verified else f"not verified: {outcome.note or 'verify is off'}"
    took = outcome.completed - outcome.started
    return f"{outcome.key}: {outcome.size} bytes at revision {outcome.revision}, {verified}, took {took:.2f}s"


async def _recorded(store: ObjectStore, key: str) -> tuple[bool, float | None]:
    """Whether a backup's metadata says it is verified, and until when it is locked."""
    try:
        meta = json.loads(await store.get_bytes(metadata_key(key)))
        until = meta.get("retainUntil")
        return bool(meta.get("verified")), float(until) if until is not None else None
    except (StoreError, ValueError, TypeError, AttributeError):
        return False, None  # no metadata: an interrupted backup, never the one a restore relies on


async def _wake(handle: Handle[Wake], every: float) -> None:
    while True:
        handle.send_nowait(Wake())  # coalesced: a slow backup has one pending wake, never a queue
        await trio.sleep(every)


def backup_child(
    ports: BackupPorts, *, wake_every: float = WAKE_EVERY, retry: Backoff = RETRY
) -> ChildFactory:
    """The per-cluster child for backups: the actor with its wake-up timer, restarted together."""

    def child(context: ClusterContext) -> ChildSpec:
        async def start(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            handle: Handle[Wake] = Handle(Mailbox(1, coalesce_key=lambda msg: "wake"), id="backup")
            async with trio.open_nursery() as nursery:
                await nursery.start(run_actor, BackupActor(context, ports, retry), handle)
                nursery.start_soon(_wake, handle, wake_every)
                task_status.started()

        return ChildSpec("backup", start, shutdown=5.0)

    return child

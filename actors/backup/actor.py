"""The backup-schedule actor: a per-cluster child that takes scheduled backups.

It wakes every few seconds and asks the schedule (schedule.py) whether a backup is due: one
backup at a time, from what the cluster actor last observed (it never observes on its own). A
success resets the failure count and applies retention; a failure is retried with backoff.
What it knows reaches the cluster's status through the tree's ServiceReports.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable

import trio
from attrs import frozen

from actors.backup.health import BackupReport
from actors.backup.job import BackupFailed, BackupOutcome, take_backup
from actors.backup.ports import SnapshotVerifier
from actors.backup.retention import BackupRecord, expired
from actors.backup.schedule import due, utc
from actors.backup.source import metadata_key, taken_at
from actors.cluster import ChildFactory, ClusterContext, ServicesReported, nudge
from actors.errors import StoreError
from actors.model import BackupSpec, BackupStatus, LastBackup, StoreSpec, duration_seconds
from actors.store_port import ObjectStore
from supervisor.backoff import Backoff
from supervisor.runtime import Actor, ChildSpec, Handle, Mailbox, run_actor

log = logging.getLogger(__name__)

# How often the schedule is looked at: cron slots are a minute apart.
WAKE_EVERY = 5.0
# A failed backup is tried again after 30 s, doubling up to 30 min, until it works.
RETRY = Backoff(initial=30.0, maximum=1800.0, multiplier=2.0, jitter=0.1)


@frozen
class Wake:
    """Look at the schedule (a timer tick)."""


@frozen
class BackupPorts:
    """What backups need beyond the cluster's ports. `open_store` opens a store for one use;
    the actor closes it."""

    open_store: Callable[[StoreSpec], ObjectStore]
    verifier: SnapshotVerifier | None
    clock: Callable[[], float] = time.time  # wall time, for the schedule (tests speed it up)


class BackupActor(Actor[Wake]):
    def __init__(self, context: ClusterContext, ports: BackupPorts) -> None:
        self._context = context
        self._ports = ports
        report = context.reports.backup
        self._status = report.status if report else BackupStatus()
        # Start of the last scheduled backup; None until read back from the store.
        self._since: float | None = self._status.last_schedule_time
        self._retry_at = float("-inf")
        self._rng = random.Random()

    async def handle(self, msg: Wake) -> None:
        spec = self._context.desired().resource.spec.backup
        if spec is None or spec.schedule is None or spec.store is None:
            return
        now = self._ports.clock()
        if self._since is None:
            self._since = await self._newest_backup_time(spec.store) or now
        if trio.current_time() < self._retry_at or not due(spec.schedule, utc(self._since), utc(now)):
            return
        if self._context.feed.latest is not None:  # the cluster actor has looked at least once
            await self._backup(spec, spec.store, now)

    async def _backup(self, spec: BackupSpec, store_spec: StoreSpec, now: float) -> None:
        observed = self._context.feed.latest
        assert observed is not None
        verifier = self._ports.verifier if spec.verify else None
        store = self._ports.open_store(store_spec)
        try:
            admin = self._context.ports.admin
            outcome = await take_backup(observed, admin, store, verifier=verifier, clock=self._ports.clock)
            await self._succeeded(spec, store, outcome, now)
        except (BackupFailed, StoreError) as exc:
            await self._failed(now, str(exc))
        finally:
            await store.aclose()

    async def _succeeded(
        self, spec: BackupSpec, store: ObjectStore, outcome: BackupOutcome, now: float
    ) -> None:
        self._since = now
        last = LastBackup(outcome.key, outcome.revision, outcome.size, outcome.verified, outcome.completed)
        self._report(BackupStatus(now, last, 0))
        verified = "verified" if outcome.verified else f"not verified: {outcome.note or 'verify is off'}"
        message = f"{outcome.key}: {outcome.size} bytes at revision {outcome.revision}, {verified}"
        await self._event("BackupSucceeded", message)
        await self._apply_retention(spec, store, now)

    async def _failed(self, now: float, why: str) -> None:
        failures = self._status.consecutive_failures + 1
        self._retry_at = trio.current_time() + RETRY.delay(failures - 1, self._rng)
        self._report(BackupStatus(now, self._status.last_successful_backup, failures), why)
        log.warning("backup of %s failed (%d in a row): %s", self._context.ref, failures, why)
        await self._event("BackupFailed", why, warning=True)

    async def _apply_retention(self, spec: BackupSpec, store: ObjectStore, now: float) -> None:
        keep, max_age = spec.retention.keep, spec.retention.max_age
        if keep is None and max_age is None:
            return
        age = duration_seconds(max_age) if max_age else None
        for doomed in expired(await self._records(store), keep=keep, max_age=age, now=now):
            await store.delete(doomed.key)
            await store.delete(metadata_key(doomed.key))
            await self._event("BackupDeleted", f"{doomed.key}: retention (keep {keep}, maxAge {max_age})")

    async def _records(self, store: ObjectStore) -> list[BackupRecord]:
        ref = self._context.ref
        snapshots = [o for o in await store.list(f"{ref.namespace}/{ref.name}/") if o.key.endswith(".db")]
        return [
            BackupRecord(o.key, taken_at(o.key, o.modified), await _verified(store, o.key)) for o in snapshots
        ]

    async def _newest_backup_time(self, store_spec: StoreSpec) -> float | None:
        store = self._ports.open_store(store_spec)
        try:
            return max((r.taken_at for r in await self._records(store)), default=None)
        except StoreError:
            return None  # the first attempt will say what is wrong with the store
        finally:
            await store.aclose()

    def _report(self, status: BackupStatus, last_error: str = "") -> None:
        self._status = status
        self._context.reports.backup = BackupReport(status, last_error)
        nudge(self._context.handle, ServicesReported())

    async def _event(self, reason: str, message: str, *, warning: bool = False) -> None:
        ref = self._context.ref
        await self._context.ports.events.record(ref, reason=reason, message=message, warning=warning)


async def _verified(store: ObjectStore, key: str) -> bool:
    try:
        return bool(json.loads(await store.get_bytes(metadata_key(key))).get("verified"))
    except (StoreError, ValueError):
        return False  # no metadata: an interrupted backup, never the one a restore relies on


async def _wake(handle: Handle[Wake], every: float) -> None:
    while True:
        handle.send_nowait(Wake())  # coalesced: a slow backup has one pending wake, never a queue
        await trio.sleep(every)


def backup_child(ports: BackupPorts, *, wake_every: float = WAKE_EVERY) -> ChildFactory:
    """The per-cluster child for backups: the actor with its wake-up timer, restarted together."""

    def child(context: ClusterContext) -> ChildSpec:
        async def start(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            handle: Handle[Wake] = Handle(Mailbox(1, coalesce_key=lambda msg: "wake"), id="backup")
            async with trio.open_nursery() as nursery:
                await nursery.start(run_actor, BackupActor(context, ports), handle)
                nursery.start_soon(_wake, handle, wake_every)
                task_status.started()

        return ChildSpec("backup", start, shutdown=5.0)

    return child

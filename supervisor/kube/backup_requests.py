"""EtcdBackup objects on Kubernetes: actors.backup.ports.BackupRequests (on-demand backups) and
BackupResolver (spec.restore.backupName).

A watch keeps every EtcdBackup in memory, so each cluster's backup actor asks its queue every
few seconds without a request to the API server. Each step's status goes to the status
subresource, and a phase change is an Event on the EtcdBackup (`kubectl describe etcdbackup`).
What was reported is remembered until the watch shows it, so a finished backup is never
taken twice. An EtcdBackup the CRD let through but the codec refuses is Failed with the reason.

An EtcdBackup of a cluster that does not exist waits, saying so, for ORPHAN_AFTER from its
creation (a manifest may create both, the backup first), then is Failed naming the cluster: it
would otherwise stay Pending for ever with nobody to take it.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio

from actors.backup.restore_source import backup_restore_source
from actors.codec import InvalidBackup, backup_status_to_dict, parse_etcd_backup, parse_spec
from actors.errors import RestoreFailed
from actors.model import (
    API_GROUP,
    API_VERSION,
    BACKUP_KIND,
    BackupPhase,
    ClusterRef,
    EtcdBackup,
    EtcdBackupSpec,
    EtcdBackupStatus,
    RestoreSpec,
)
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError, is_not_found
from supervisor.kube.status import KubeEventSink
from supervisor.kube.watch import EventType, Resource, WatchEvent, run_watchers, watchers_for

log = logging.getLogger(__name__)

ETCD_BACKUPS = Resource(f"/apis/{API_GROUP}/{API_VERSION}", "etcdbackups")
_EVENT_REASONS = {
    BackupPhase.RUNNING: "BackupRunning",
    BackupPhase.SUCCEEDED: "BackupSucceeded",
    BackupPhase.FAILED: "BackupFailed",
}


ORPHAN_AFTER = 120.0  # seconds an EtcdBackup may name a cluster that does not exist (yet)
SWEEP_EVERY = 15.0  # how often backups of missing clusters are looked at


def backup_path(namespace: str, name: str) -> str:
    return f"{ETCD_BACKUPS.path(namespace)}/{name}"


def _document(obj: Mapping[str, Any]) -> dict[str, Any]:
    # Items of a list carry no apiVersion/kind; the resource type is known here.
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": BACKUP_KIND, **obj}


def _created(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('creationTimestamp', '')}/{meta.get('name', '')}"


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def _created_at(obj: Mapping[str, Any]) -> float:
    stamp = str((obj.get("metadata") or {}).get("creationTimestamp") or "")
    try:
        return dt.datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return 0.0  # no time to go by: as old as can be


class KubeBackupRequests:
    """BackupRequests over EtcdBackup objects; `run` (the watch) must be running."""

    def __init__(
        self,
        client: KubeClient,
        events: KubeEventSink,
        namespaces: list[str] | None,
        *,
        orphan_after: float = ORPHAN_AFTER,
        sweep_every: float = SWEEP_EVERY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._events = events
        self._watchers = watchers_for(client, ETCD_BACKUPS, namespaces)
        # uid -> the status last written, ahead of what the watch has shown.
        self._reported: dict[str, EtcdBackupStatus] = {}
        self._orphan_after = orphan_after
        self._sweep_every = sweep_every
        self._clock = clock

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        send, receive = trio.open_memory_channel[WatchEvent](64)
        async with trio.open_nursery() as nursery:
            await nursery.start(run_watchers, self._watchers, send)
            nursery.start_soon(self._sweep_orphans)
            task_status.started()
            async with receive:
                async for event in receive:
                    if event.type in (EventType.ADDED, EventType.MODIFIED):
                        await self._check(event.object)

    async def _check(self, obj: Mapping[str, Any]) -> None:
        """Fail an invalid EtcdBackup once, with the reason: it would otherwise stay Pending."""
        try:
            parse_etcd_backup(_document(obj))
        except InvalidBackup as exc:
            meta = obj.get("metadata") or {}
            if (obj.get("status") or {}).get("phase") == BackupPhase.FAILED.value:
                return
            backup = EtcdBackup(
                namespace=str(meta.get("namespace", "")),
                name=str(meta.get("name", "")),
                spec=EtcdBackupSpec(cluster_name=str((obj.get("spec") or {}).get("clusterName") or "")),
                uid=str(meta.get("uid", "")),
            )
            await self.report(backup, EtcdBackupStatus(BackupPhase.FAILED, message=f"invalid: {exc}"))

    async def _sweep_orphans(self) -> None:
        while True:
            await trio.sleep(self._sweep_every)
            try:
                await self._fail_orphans()
            except KubeError as exc:  # the API server is away: look again next time
                log.warning("backups of missing clusters not checked: %s", exc)

    async def _fail_orphans(self) -> None:
        created = {_uid(o): _created_at(o) for w in self._watchers for o in w.snapshot()}
        for backup in self._backups(None):
            if backup.status.phase is not BackupPhase.PENDING:
                continue
            missing = f"no EtcdCluster {backup.spec.cluster_name} in namespace {backup.namespace}"
            waiting_message = f"waiting: {missing} (yet)"
            if await self._client.get_or_none(m.cluster_path(backup.cluster)) is not None:
                if backup.status.message == waiting_message:  # it came: the wait is over
                    await self.report(backup, EtcdBackupStatus(BackupPhase.PENDING))
                continue
            if self._clock() - created.get(backup.uid, 0.0) >= self._orphan_after:
                failed = EtcdBackupStatus(BackupPhase.FAILED, completion_time=self._clock(), message=missing)
                await self.report(backup, failed)
            elif backup.status.message != waiting_message:
                await self.report(backup, EtcdBackupStatus(BackupPhase.PENDING, message=waiting_message))

    def _backups(self, namespace: str | None) -> list[EtcdBackup]:
        """Oldest first, in `namespace` (None: all), with the status last written."""
        objs = [o for w in self._watchers for o in w.snapshot()]
        out = []
        for obj in sorted(objs, key=_created):
            if namespace is not None and (obj.get("metadata") or {}).get("namespace") != namespace:
                continue
            try:
                backup = parse_etcd_backup(_document(obj))
            except InvalidBackup:
                continue  # _check has failed it
            if backup.uid in self._reported:
                backup = EtcdBackup(
                    backup.namespace, backup.name, backup.spec, self._reported[backup.uid], backup.uid
                )
            out.append(backup)
        return out

    async def pending(self, cluster: ClusterRef) -> Sequence[EtcdBackup]:
        return [
            b
            for b in self._backups(cluster.namespace)
            if b.spec.cluster_name == cluster.name and not b.status.phase.finished
        ]

    async def report(self, backup: EtcdBackup, status: EtcdBackupStatus) -> None:
        before = self._reported.get(backup.uid, backup.status)
        self._reported[backup.uid] = status
        try:
            await self._client.merge_patch(
                backup_path(backup.namespace, backup.name) + "/status",
                {"status": backup_status_to_dict(status)},
            )
        except KubeError as exc:
            if is_not_found(exc):
                return  # deleted meanwhile: nothing to tell
            log.warning("status of EtcdBackup %s not written: %s", backup, exc)
            return
        if status.phase is not before.phase and status.phase in _EVENT_REASONS:
            await self._events.record_on(
                BACKUP_KIND,
                backup.namespace,
                backup.name,
                backup.uid,
                reason=_EVENT_REASONS[status.phase],
                message=status.message or status.key or status.phase.value,
                warning=status.phase is BackupPhase.FAILED,
            )


class KubeBackupResolver:
    """BackupResolver: the EtcdBackup read from the API server (a watch may lag a fresh one)."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    async def resolve(self, namespace: str, name: str) -> RestoreSpec:
        obj = await self._client.get_or_none(backup_path(namespace, name))
        if obj is None:
            raise RestoreFailed(f"no EtcdBackup {name} in namespace {namespace}")
        try:
            backup = parse_etcd_backup(_document(obj))
        except InvalidBackup as exc:
            raise RestoreFailed(f"EtcdBackup {namespace}/{name} is invalid: {exc}") from exc
        cluster = await self._client.get_or_none(m.cluster_path(backup.cluster))
        spec = parse_spec((cluster or {}).get("spec") or {})
        return backup_restore_source(backup, spec.backup.store if spec.backup else None)

"""On-demand backups in local mode: the EtcdBackup documents of the manifest file, each one's
status in state_dir/<namespace>/<clusterName>/backups/<name>.json (the CRD's status shape).

The status file is the memory: a backup whose file says Succeeded or Failed is never taken
again, by this daemon or the next one; one the previous daemon left Pending or Running is
taken again. A backup of a cluster the manifest does not have is Failed at once, saying so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Set
from pathlib import Path

import trio

from actors.backup.ports import BackupRequests
from actors.backup.restore_source import backup_restore_source
from actors.codec import backup_status_from_dict, backup_status_to_dict
from actors.errors import RestoreFailed
from actors.model import (
    BackupPhase,
    ClusterRef,
    ClusterResource,
    EtcdBackup,
    EtcdBackupStatus,
    RestoreSpec,
)
from actors.ports import EventSink
from supervisor.local.layout import StateLayout, write_json_atomically


class LocalBackupRequests:
    """actors.backup.ports.BackupRequests (and BackupResolver) for local mode."""

    def __init__(self, state_dir: Path, events: EventSink, clock: Callable[[], float] = time.time) -> None:
        self._layout = StateLayout(Path(state_dir))
        self._events = events
        self._clock = clock
        # Every backup of the manifest, by (namespace, name), in the order first seen.
        self._backups: dict[tuple[str, str], EtcdBackup] = {}
        self._clusters: dict[ClusterRef, ClusterResource] = {}
        self._named: set[ClusterRef] = set()

    def get(self, namespace: str, name: str) -> EtcdBackup | None:
        """A backup of the manifest as known now, its latest status with it."""
        return self._backups.get((namespace, name))

    def path(self, backup: EtcdBackup) -> Path:
        return self._layout.cluster(backup.cluster).root / "backups" / f"{backup.name}.json"

    async def update(
        self, backups: Iterable[EtcdBackup], clusters: Iterable[ClusterResource], named: Set[ClusterRef]
    ) -> None:
        """What the manifest holds now: its backups, its valid clusters, and every cluster it
        names (valid or not). New backups get their status back from their file, or Pending; a
        backup of a cluster the manifest does not name is Failed."""
        self._clusters = {c.ref: c for c in clusters}
        self._named = set(named)
        known = {}
        for backup in backups:
            seen = self._backups.get((backup.namespace, backup.name))
            if seen is None or seen.spec != backup.spec:
                seen = await self._first_look(backup)
            known[(backup.namespace, backup.name)] = seen
        self._backups = known

    async def _first_look(self, backup: EtcdBackup) -> EtcdBackup:
        status = self._read_status(backup)
        backup = backup.with_status(status or EtcdBackupStatus())
        if status is None:
            await self._write(backup)
        if not backup.status.phase.finished and backup.cluster not in self._named:
            why = f"no EtcdCluster {backup.spec.cluster_name} in namespace {backup.namespace}"
            failed = EtcdBackupStatus(BackupPhase.FAILED, completion_time=self._clock(), message=why)
            backup = backup.with_status(failed)
            await self._write(backup)
            message = f"on-demand backup {backup.name}: {why}"
            await self._events.record(backup.cluster, reason="BackupFailed", message=message, warning=True)
        return backup

    def _read_status(self, backup: EtcdBackup) -> EtcdBackupStatus | None:
        try:
            doc = json.loads(self.path(backup).read_text())
        except (OSError, ValueError):
            return None
        return backup_status_from_dict(doc) if isinstance(doc, dict) else None

    # --- BackupRequests ---------------------------------------------------------------------------

    async def pending(self, cluster: ClusterRef) -> list[EtcdBackup]:
        return [b for b in self._backups.values() if b.cluster == cluster and not b.status.phase.finished]

    async def report(self, backup: EtcdBackup, status: EtcdBackupStatus) -> None:
        key = (backup.namespace, backup.name)
        if key in self._backups:  # not when it left the manifest meanwhile: then it is done
            self._backups[key] = self._backups[key].with_status(status)
        await self._write(backup.with_status(status))

    async def _write(self, backup: EtcdBackup) -> None:
        doc = backup_status_to_dict(backup.status)
        await trio.to_thread.run_sync(write_json_atomically, self.path(backup), doc)

    # --- BackupResolver ---------------------------------------------------------------------------

    async def resolve(self, namespace: str, name: str) -> RestoreSpec:
        backup = self.get(namespace, name)
        if backup is None:
            raise RestoreFailed(f"no EtcdBackup {name} in namespace {namespace}")
        cluster = self._clusters.get(backup.cluster)
        cluster_backup = cluster.spec.backup if cluster is not None else None
        return backup_restore_source(backup, cluster_backup.store if cluster_backup else None)


def _conforms_to_the_port(requests: LocalBackupRequests) -> BackupRequests:
    return requests  # mypy proves LocalBackupRequests implements BackupRequests

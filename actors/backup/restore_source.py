"""Which snapshot `spec.restore.backupName` means (pure): the EtcdBackup's key, in its own store
or, when it names none, in the store of the cluster it backed up."""

from __future__ import annotations

from actors.errors import RestoreFailed
from actors.model import BackupPhase, EtcdBackup, RestoreSpec, StoreSpec


def backup_restore_source(backup: EtcdBackup, cluster_store: StoreSpec | None) -> RestoreSpec:
    """`cluster_store`: spec.backup.store of the backed-up cluster (None when it is gone or has
    none). RestoreFailed, naming the backup and the reason, when it cannot be restored from."""
    status = backup.status
    if status.phase is not BackupPhase.SUCCEEDED:
        why = f": {status.message}" if status.message else ""
        raise RestoreFailed(f"EtcdBackup {backup.name} is {status.phase.value}, not Succeeded{why}")
    if not status.key:
        raise RestoreFailed(
            f"EtcdBackup {backup.name} records no key: its status was not written by a backup"
        )
    store = backup.spec.store or cluster_store
    if store is None:
        raise RestoreFailed(
            f"EtcdBackup {backup.name} names no spec.store, and the store of EtcdCluster "
            f"{backup.spec.cluster_name} it was taken to is unknown "
            "(the cluster is gone or has no spec.backup.store)"
        )
    return RestoreSpec(store=store, key=status.key)

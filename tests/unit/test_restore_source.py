"""spec.restore.backupName -> the snapshot's store and key, or why it cannot be restored."""

import pytest

from actors.backup.restore_source import backup_restore_source
from actors.errors import RestoreFailed
from actors.model import BackupPhase, EtcdBackup, EtcdBackupSpec, EtcdBackupStatus, LocalStore, StoreSpec

OWN = StoreSpec(local=LocalStore("own"))
CLUSTERS = StoreSpec(local=LocalStore("cluster's"))


def backup(status: EtcdBackupStatus, store: StoreSpec | None = None) -> EtcdBackup:
    return EtcdBackup("default", "b", EtcdBackupSpec("demo", store), status)


def test_a_succeeded_backup_is_found_in_its_own_store_else_its_clusters():
    done = EtcdBackupStatus(BackupPhase.SUCCEEDED, key="default/demo/on-demand/b.db")
    assert backup_restore_source(backup(done, OWN), CLUSTERS).store == OWN
    source = backup_restore_source(backup(done), CLUSTERS)
    assert (source.store, source.key) == (CLUSTERS, "default/demo/on-demand/b.db")
    with pytest.raises(RestoreFailed, match=r"names no spec\.store"):
        backup_restore_source(backup(done), None)


@pytest.mark.parametrize("phase", [BackupPhase.PENDING, BackupPhase.RUNNING, BackupPhase.FAILED])
def test_a_backup_that_did_not_succeed_is_refused_saying_why(phase):
    with pytest.raises(RestoreFailed, match=f"EtcdBackup b is {phase.value}, not Succeeded: disk full"):
        backup_restore_source(backup(EtcdBackupStatus(phase, message="disk full")), CLUSTERS)

"""spec.restore.backupName -> the snapshot's store and key, or why it cannot be restored."""

import pytest

from actors.backup.restore_checks import resolve_source
from actors.backup.restore_source import backup_restore_source
from actors.errors import RestoreFailed
from actors.model import (
    BackupPhase,
    ClusterRef,
    EtcdBackup,
    EtcdBackupSpec,
    EtcdBackupStatus,
    LocalStore,
    RestoreSpec,
    StoreSpec,
)

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


class _Resolver:
    """The BackupResolver port over a table of EtcdBackups (namespace, name) -> source."""

    def __init__(self, known: dict[tuple[str, str], RestoreSpec]) -> None:
        self.known = known

    async def resolve(self, namespace: str, name: str) -> RestoreSpec:
        try:
            return self.known[(namespace, name)]
        except KeyError:
            raise RestoreFailed(f"EtcdBackup {name} not found in {namespace}") from None


DEMO = ClusterRef("prod", "demo")


async def test_a_backup_name_is_resolved_in_the_clusters_namespace_keeping_the_revision():
    resolver = _Resolver({("prod", "b"): RestoreSpec(store=OWN, key="prod/demo/b.db")})
    store, key, source = await resolve_source(
        RestoreSpec(backup_name="b", revision=42), DEMO, resolver, where="x"
    )
    assert (store, key) == (OWN, "prod/demo/b.db")
    assert (source.store, source.key, source.revision) == (OWN, "prod/demo/b.db", 42)
    with pytest.raises(RestoreFailed, match="EtcdBackup b not found in dev"):
        await resolve_source(RestoreSpec(backup_name="b"), ClusterRef("dev", "demo"), resolver, where="x")


async def test_a_source_that_cannot_be_told_is_refused_saying_why():
    with pytest.raises(RestoreFailed, match="restoring from an EtcdBackup is not set up in this daemon"):
        await resolve_source(RestoreSpec(backup_name="b"), DEMO, None, where="daemon")
    with pytest.raises(RestoreFailed, match=r"spec\.restore names no store and key"):
        await resolve_source(RestoreSpec(store=OWN), DEMO, None, where="daemon")
    store, key, _ = await resolve_source(RestoreSpec(store=OWN, key="k.db"), DEMO, None, where="daemon")
    assert (store, key) == (OWN, "k.db")

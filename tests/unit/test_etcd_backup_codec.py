"""EtcdBackup documents <-> records: every broken rule named by its field, status round-trips."""

import pytest

from actors.codec import InvalidBackup, backup_status_from_dict, backup_status_to_dict, parse_etcd_backup
from actors.model import BackupPhase, ClusterRef, EtcdBackupStatus, LocalStore

API = "etcd.io/v1alpha1"


def test_a_backup_names_its_cluster_and_optionally_a_store():
    backup = parse_etcd_backup(
        {
            "apiVersion": API,
            "kind": "EtcdBackup",
            "metadata": {"name": "before-upgrade", "namespace": "prod"},
            "spec": {"clusterName": "demo", "store": {"local": {"path": "backups"}}},
        }
    )
    assert (backup.namespace, backup.name, backup.cluster) == (
        "prod",
        "before-upgrade",
        ClusterRef("prod", "demo"),
    )
    assert backup.spec.store is not None and backup.spec.store.local == LocalStore("backups")
    assert backup.status.phase is BackupPhase.PENDING
    plain = parse_etcd_backup(
        {"apiVersion": API, "kind": "EtcdBackup", "metadata": {"name": "b"}, "spec": {"clusterName": "demo"}}
    )
    assert plain.spec.store is None and plain.namespace == "default"


def test_every_broken_rule_is_named():
    with pytest.raises(InvalidBackup) as caught:
        parse_etcd_backup(
            {
                "apiVersion": API,
                "kind": "EtcdBackup",
                "metadata": {"name": "Bad_Name"},
                "spec": {"store": {"local": {}, "s3": {"bucket": "b"}}, "extra": 1},
            }
        )
    fields = {e.field for e in caught.value.errors}
    assert fields == {"metadata.name", "spec.clusterName", "spec.extra", "spec.store"}
    assert "required" in str(caught.value)


def test_status_round_trips_through_the_crd_shape():
    status = EtcdBackupStatus(
        BackupPhase.SUCCEEDED, "default/demo/on-demand/b-20261123T040000Z-rev9.db", 1234, 9, "ab" * 32, True,
        1_795_000_000.0, 1_795_000_060.0, "verified",
    )  # fmt: skip
    doc = backup_status_to_dict(status)
    assert doc["phase"] == "Succeeded" and doc["completionTime"] == "2026-11-18T11:07:40Z"
    assert backup_status_from_dict(doc) == status
    # Written by hand or by an older daemon: unreadable fields count as unset, nothing raises.
    assert backup_status_from_dict({"phase": "Sideways", "sizeBytes": "big"}) == EtcdBackupStatus()


def test_a_cluster_may_be_restored_from_a_store_and_key():
    # spec.restore was missing from the fields a spec may have: every restore was refused.
    from actors.codec import parse_cluster

    store = {"local": {"path": "backups"}}
    doc = {
        "apiVersion": API,
        "kind": "EtcdCluster",
        "metadata": {"name": "r"},
        "spec": {"restore": {"store": store, "key": "k.db"}},
    }
    restore = parse_cluster(doc).spec.restore
    assert restore is not None and restore.key == "k.db"

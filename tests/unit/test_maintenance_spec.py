"""spec.maintenance: read with every broken rule named, and turned into the same etcd flags for
both runtimes."""

from pathlib import Path

import pytest

from actors.codec import InvalidCluster, parse_cluster
from actors.model import (
    DEFAULT_QUOTA_BYTES,
    AutoCompactionSpec,
    ClusterRef,
    ClusterSpec,
    CompactionMode,
    DefragSpec,
    MaintenanceSpec,
    MemberLaunch,
    MemberUrls,
    quantity_bytes,
)
from supervisor.etcd.member_settings import member_settings
from supervisor.local.etcd_command import etcd_argv
from supervisor.local.layout import MemberLayout


def parsed(maintenance):
    document = {"apiVersion": "etcd.io/v1alpha1", "kind": "EtcdCluster", "metadata": {"name": "demo"}}
    return parse_cluster({**document, "spec": {"maintenance": maintenance}}).spec.maintenance


def errors_of(maintenance):
    with pytest.raises(InvalidCluster) as info:
        parsed(maintenance)
    return {e.field: e.rule for e in info.value.errors}


def test_the_requirements_example_reads_as_written():
    got = parsed(
        {
            "defrag": {"schedule": "0 3 * * *", "fragmentationRatio": 0.5, "minReclaim": "64Mi"},
            "autoCompaction": {"mode": "revision", "retention": 10000},
            "quotaBackendBytes": "8Gi",
        }
    )
    assert got == MaintenanceSpec(
        defrag=DefragSpec("0 3 * * *", 0.5, "64Mi"),
        auto_compaction=AutoCompactionSpec(CompactionMode.REVISION, "10000"),
        quota_backend_bytes="8Gi",
    )
    assert got.quota_bytes == 8 * 1024**3


def test_absent_means_etcd_defaults_and_defrag_only_for_nospace():
    assert parsed(None) == MaintenanceSpec() == ClusterSpec().maintenance
    assert MaintenanceSpec().quota_bytes == DEFAULT_QUOTA_BYTES
    assert parsed({"defrag": {}}).defrag == DefragSpec(None, 0.5, "64Mi")


@pytest.mark.parametrize(
    ("maintenance", "field", "words"),
    [
        ({"defrag": {"schedule": "daily"}}, "spec.maintenance.defrag.schedule", "5-field cron"),
        ({"defrag": {"fragmentationRatio": 1.5}}, "spec.maintenance.defrag.fragmentationRatio", "0 to 1"),
        ({"defrag": {"fragmentationRatio": "half"}}, "spec.maintenance.defrag.fragmentationRatio", "0 to 1"),
        ({"defrag": {"minReclaim": "lots"}}, "spec.maintenance.defrag.minReclaim", "quantity"),
        (
            {"autoCompaction": {"mode": "hourly"}},
            "spec.maintenance.autoCompaction.mode",
            "periodic or revision",
        ),
        (
            {"autoCompaction": {"retention": "1 hour"}},
            "spec.maintenance.autoCompaction.retention",
            "duration",
        ),
        (
            {"autoCompaction": {"mode": "revision", "retention": "1h"}},
            "spec.maintenance.autoCompaction.retention",
            "whole number",
        ),
        ({"quotaBackendBytes": "0"}, "spec.maintenance.quotaBackendBytes", "positive quantity"),
        ({"quotaBackendBytes": "8 GB"}, "spec.maintenance.quotaBackendBytes", "positive quantity"),
        ({"defrag": {"every": "day"}}, "spec.maintenance.defrag.every", "unknown field"),
        ({"quota": "8Gi"}, "spec.maintenance.quota", "unknown field"),
    ],
)
def test_each_broken_rule_names_its_field(maintenance, field, words):
    errors = errors_of(maintenance)
    assert field in errors
    assert words in errors[field]


def test_quantities():
    assert quantity_bytes("64Mi") == 64 * 2**20
    assert quantity_bytes("1.5Gi") == 3 * 2**29
    assert quantity_bytes("500M") == 500_000_000
    assert quantity_bytes("1048576") == 2**20
    with pytest.raises(ValueError):
        quantity_bytes("8 GB")


def test_compaction_and_quota_become_flags_and_replace_the_local_defaults(tmp_path: Path):
    maintenance = MaintenanceSpec(
        auto_compaction=AutoCompactionSpec(CompactionMode.REVISION, "10000"), quota_backend_bytes="16Mi"
    )
    spec = ClusterSpec(maintenance=maintenance)
    settings = dict(member_settings(spec))
    assert settings["auto-compaction-mode"] == "revision"
    assert settings["auto-compaction-retention"] == "10000"
    assert settings["quota-backend-bytes"] == str(16 * 2**20)
    assert "quota-backend-bytes" not in dict(member_settings(ClusterSpec()))

    urls = MemberUrls("http://127.0.0.1:2380", "http://127.0.0.1:2379")
    launch = MemberLaunch(ClusterRef("default", "demo"), "demo-0", urls, (), "new", spec)
    argv = etcd_argv(Path("etcd"), launch, MemberLayout(tmp_path / "demo-0"), None)
    quota = [a for a in argv if a.startswith("--quota-backend-bytes=")]
    mode = [a for a in argv if a.startswith("--auto-compaction-mode=")]
    assert quota == [f"--quota-backend-bytes={16 * 2**20}"]
    assert mode == ["--auto-compaction-mode=revision"]


def test_members_stop_serving_grpc_health_while_they_defragment_where_etcd_can():
    def flags(version: str) -> dict[str, str]:
        return dict(member_settings(ClusterSpec(version=version)))

    assert flags("3.6.16")["feature-gates"] == "StopGRPCServiceOnDefrag=true"
    assert flags("3.7.3")["feature-gates"] == "StopGRPCServiceOnDefrag=true"
    assert "experimental-stop-grpc-service-on-defrag" not in flags("3.7.3")  # 3.7 removed it
    assert flags("3.5.35")["experimental-stop-grpc-service-on-defrag"] == "true"
    assert flags("3.5.13")["experimental-stop-grpc-service-on-defrag"] == "true"
    for older in ("3.5.12", "3.5.9", "3.4.25"):
        assert not {"feature-gates", "experimental-stop-grpc-service-on-defrag"} & set(flags(older)), older

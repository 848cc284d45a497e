"""The etcd releases built from the Go modules by `make etcd-versions` (skipped until built):
each binary is the version pinned in tests/envtest/etcd-versions.txt, and each etcd serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.etcd import running_cluster
from tests.harness.etcd_versions import built_or_skip, pinned_versions, reported_version


@pytest.mark.parametrize("version", pinned_versions())
def test_built_binaries_report_their_version_and_serve(version: str, tmp_path: Path) -> None:
    binaries = built_or_skip(version)
    assert reported_version(binaries.etcd, "--version") == version
    assert reported_version(binaries.etcdctl, "version") == version
    if version.startswith("3.4."):
        assert binaries.etcdutl is None  # 3.4 has no etcdutl; its etcdctl holds the offline tools
    else:
        assert binaries.etcdutl is not None
        assert reported_version(binaries.etcdutl, "version") == version

    with running_cluster(binaries, tmp_path, size=1) as cluster:
        cluster.etcdctl("put", "built", version)
        assert cluster.etcdctl("get", "built", "--print-value-only").strip() == version

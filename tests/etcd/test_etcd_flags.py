"""The flag lists spec.etcdOptions is checked against (actors/etcd_flags.py) are what the etcd
binaries in use accept: `etcd --help` of each pinned version, and no flag we own is missing."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from actors.etcd_flags import FEATURE_GATES, FLAGS, OWNED, OWNED_GATES, REPLACED
from actors.model import ClusterSpec
from supervisor.etcd.member_settings import member_settings
from supervisor.kube import manifests
from supervisor.local import etcd_command
from tests.harness.etcd import running_cluster
from tests.harness.etcd_versions import built_or_skip, pinned, pinned_versions


@pytest.mark.parametrize("version", pinned_versions())
def test_the_flag_list_of_each_minor_is_the_binarys_own(version: str) -> None:
    binaries = built_or_skip(version)
    run = subprocess.run([str(binaries.etcd), "--help"], capture_output=True, text=True, check=False)
    listed = set(re.findall(r"^\s+--([a-z0-9-]+)", run.stdout + run.stderr, re.MULTILINE))
    minor = ".".join(version.split(".")[:2])
    assert FLAGS[minor] == listed


@pytest.mark.parametrize("version", pinned_versions())
def test_the_feature_gates_of_each_minor_are_the_binarys_own(version: str) -> None:
    binaries = built_or_skip(version)
    run = subprocess.run([str(binaries.etcd), "--help"], capture_output=True, text=True, check=False)
    out = run.stdout + run.stderr
    minor = ".".join(version.split(".")[:2])
    if "--feature-gates" not in out:
        assert minor not in FEATURE_GATES and "feature-gates" not in FLAGS[minor]
        return
    gates = out[out.index("--feature-gates") : out.index("Clustering:")]
    assert FEATURE_GATES[minor] == set(re.findall(r"^\s+([A-Za-z0-9]+)=true\|false", gates, re.MULTILINE))
    assert set(OWNED_GATES) <= FEATURE_GATES[minor]


def test_each_experimental_flag_3_7_removed_names_a_replacement_3_6_and_3_7_both_know() -> None:
    assert set(REPLACED) == {f for f in FLAGS["3.6"] - FLAGS["3.7"] if f.startswith("experimental-")}
    for replacement in REPLACED.values():
        if replacement.startswith("feature-gates: "):
            gate = replacement.removeprefix("feature-gates: ").split("=")[0]
            assert gate in FEATURE_GATES["3.6"] and gate in FEATURE_GATES["3.7"], replacement
        else:
            # 3.6's own help names the replacement; 3.6 lists only the ones it also takes.
            assert replacement in FLAGS["3.7"], replacement


@pytest.mark.parametrize("minor", ["3.6", "3.7"])
def test_a_member_with_the_users_gates_beside_ours_starts_and_serves(minor: str, tmp_path: Path) -> None:
    binaries = built_or_skip(pinned(minor))
    spec = ClusterSpec(
        version=binaries.version,
        etcd_options={
            "feature-gates": "CompactHashCheck=true,InitialCorruptCheck=true",
            "compact-hash-check-time": "1m",
        },
    )
    flags = [f"--{flag}={value}" for flag, value in member_settings(spec) if flag != "strict-reconfig-check"]
    with running_cluster(binaries, tmp_path, size=1, extra_args=flags) as cluster:
        cluster.etcdctl("put", "gates", minor)
        assert cluster.etcdctl("get", "gates", "--print-value-only").strip() == minor


# Local defaults etcdOptions may replace (supervisor/local/etcd_command.py LOCAL_FLAGS).
REPLACEABLE = {"heartbeat-interval", "election-timeout", "pre-vote", "snapshot-count"}


def test_every_flag_the_runtimes_pass_is_owned_or_a_replaceable_default() -> None:
    # A flag passed by a runtime and again from etcdOptions would be given twice.
    sources = [Path(manifests.__file__).read_text(), Path(etcd_command.__file__).read_text()]
    passed = set()
    for source in sources:
        passed |= set(re.findall(r'\("([a-z0-9-]+)", ', source)) | set(re.findall(r"--([a-z0-9-]+)=", source))
    flags = set().union(*FLAGS.values())
    assert {flag for flag in passed if flag in flags} - set(OWNED) == REPLACEABLE


def test_the_crds_rule_refuses_exactly_the_owned_flags() -> None:
    crd = (Path(manifests.__file__).parents[2] / "crds" / "etcdclusters.etcd.io.yaml").read_text()
    (listed,) = re.findall(r"self\.all\(flag, !\(flag in \[([^\]]*)\]\)\)", crd)
    assert {name.strip().strip("'") for name in listed.split(",")} == set(OWNED)

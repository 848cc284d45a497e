"""The flag lists spec.etcdOptions is checked against (actors/etcd_flags.py) are what the etcd
binaries in use accept: `etcd --help` of each pinned version, and no flag we own is missing."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from actors.etcd_flags import FLAGS, OWNED
from supervisor.kube import manifests
from supervisor.local import etcd_command
from tests.harness.etcd_versions import built_or_skip, pinned_versions


@pytest.mark.parametrize("version", pinned_versions())
def test_the_flag_list_of_each_minor_is_the_binarys_own(version: str) -> None:
    binaries = built_or_skip(version)
    run = subprocess.run([str(binaries.etcd), "--help"], capture_output=True, text=True, check=False)
    listed = set(re.findall(r"^\s+--([a-z0-9-]+)", run.stdout + run.stderr, re.MULTILINE))
    minor = ".".join(version.split(".")[:2])
    assert FLAGS[minor] == listed


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

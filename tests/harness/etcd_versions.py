"""The etcd releases built from the etcd Go modules, one per minor version, by
``tests/envtest/build-etcd.sh`` (``make etcd-versions``) into
``${XDG_CACHE_HOME:-~/.cache}/etcd-supervisor/etcd/<version>/``.

The versions are pinned in ``tests/envtest/etcd-versions.txt``; ``pinned("3.6")`` names one.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.harness.components import missing
from tests.harness.etcd import EtcdBinaries

ENVTEST = Path(__file__).resolve().parents[1] / "envtest"
VERSIONS_FILE = ENVTEST / "etcd-versions.txt"


def pinned_versions() -> list[str]:
    """Every pinned etcd version, oldest first ("3.4.25", "3.5.35", ...)."""
    lines = (line.split("#")[0].split() for line in VERSIONS_FILE.read_text().splitlines())
    return [fields[0] for fields in lines if fields]


def pinned(minor: str) -> str:
    """The pinned release of a minor version: pinned("3.5") == "3.5.35"."""
    for version in pinned_versions():
        if version.startswith(minor + "."):
            return version
    raise KeyError(f"no etcd {minor} release in {VERSIONS_FILE}")


def cache_dir(version: str) -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "etcd-supervisor" / "etcd" / version


def reported_version(binary: Path, *args: str) -> str | None:
    """The version a binary prints: `etcd --version`, `etcdctl version`, `etcdutl version`."""
    try:
        out = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"^etcd\w* [Vv]ersion: (\d+\.\d+\.\d+)", out, re.MULTILINE)
    return found.group(1) if found else None


def find_built(version: str) -> EtcdBinaries | str:
    """The cached binaries of ``version``, or why there are none (nothing is built here)."""
    directory = cache_dir(version)
    etcdutl = directory / "etcdutl"
    binaries = EtcdBinaries(
        etcd=directory / "etcd",
        etcdctl=directory / "etcdctl",
        etcdutl=etcdutl if etcdutl.exists() else None,  # 3.4 keeps the offline tools in etcdctl
        version=version,
    )
    if not (binaries.etcd.exists() and binaries.etcdctl.exists()):
        return f"etcd {version} not built in {directory} (`make etcd-versions`, minutes per version)"
    reported = reported_version(binaries.etcd, "--version")
    if reported != version:
        return f"{binaries.etcd} reports etcd {reported}, not the pinned {version}"
    return binaries


def built_or_skip(version: str) -> EtcdBinaries:
    """The cached build of ``version`` (`make test` builds them: `make etcd-versions`); without
    one a skip locally, a failure under CI=true."""
    found = find_built(version)
    if isinstance(found, str):
        missing(found)
    return found

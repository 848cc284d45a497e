"""Where the local runtime finds etcd, etcdctl and etcdutl for each version.

One directory per version, `<root>/<version>/{etcd,etcdctl,etcdutl}`, as `make etcd-versions`
builds them (from etcd's Go modules, tests/envtest/build-etcd.sh); the root is
`$ETCD_SUPERVISOR_ETCD_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/etcd-supervisor/etcd`, or
`--etcd-dir` on the command line. A user may put any release's binaries there by hand.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from attrs import frozen

ROOT_VARIABLE = "ETCD_SUPERVISOR_ETCD_DIR"


def default_root(environ: Mapping[str, str] = os.environ) -> Path:
    if environ.get(ROOT_VARIABLE):
        return Path(environ[ROOT_VARIABLE])
    cache = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "etcd-supervisor" / "etcd"


@frozen
class EtcdBuilds:
    """The etcd builds under one root directory, looked up by version."""

    root: Path

    def directory(self, version: str) -> Path:
        return self.root / version

    def tool(self, version: str, name: str) -> Path | None:
        """`name` (etcd, etcdctl, etcdutl) of `version`, if there and executable."""
        path = self.directory(version) / name
        return path if path.is_file() and os.access(path, os.X_OK) else None

    def etcd(self, version: str) -> Path | None:
        return self.tool(version, "etcd")

    def etcdutl(self, version: str) -> Path | None:
        # etcd 3.4 has no etcdutl: its etcdctl does the offline snapshot work (ETCDCTL_API=3).
        return self.tool(version, "etcdutl") or self.tool(version, "etcdctl")

    def unavailable(self, version: str) -> str:
        """Why `version` cannot run here, "" when it can: a sentence saying how to get it."""
        if self.etcd(version) is not None:
            return ""
        return (
            f"etcd {version} is not installed in {self.directory(version)}: `make etcd-versions`"
            f" builds the versions pinned in tests/envtest/etcd-versions.txt, or put etcd, etcdctl"
            f" and etcdutl of {version} there (the root is --etcd-dir or ${ROOT_VARIABLE})"
        )

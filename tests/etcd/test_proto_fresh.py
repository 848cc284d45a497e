"""The committed betterproto package matches what proto/generate.py makes of proto/src."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def test_generated_package_is_fresh(tmp_path: Path) -> None:
    fresh = tmp_path / "etcd"
    subprocess.run(
        [sys.executable, str(REPO / "proto" / "generate.py"), str(fresh)],
        check=True,
        capture_output=True,
    )
    committed = _files(REPO / "proto" / "etcd")
    regenerated = _files(fresh)
    assert committed.keys() == regenerated.keys(), "run `make proto`: the set of generated files changed"
    stale = [name for name in committed if committed[name] != regenerated[name]]
    assert not stale, f"run `make proto`: stale generated files {stale}"

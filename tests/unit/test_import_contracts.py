"""The layering in DESIGN.md is machine-checked: prove the contracts catch a violation."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_copy(tmp_path: Path, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for package in ("supervisor", "actors", "proto"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for relative, source in extra.items():
        (tmp_path / relative).write_text(source)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_tree_as_it_is_keeps_every_contract(tmp_path):
    result = lint_copy(tmp_path, {})
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        ("actors/leak.py", "import trio_asyncio\n", "Only supervisor.aio imports trio_asyncio"),
        ("actors/leak.py", "import kubernetes_asyncio\n", "Only supervisor.kube imports kubernetes_asyncio"),
        ("supervisor/local/leak.py", "import trio_asyncio\n", "Only supervisor.aio imports trio_asyncio"),
        (
            "actors/leak.py",
            "import supervisor.local.runtime\n",
            "Layers: cli -> adapters -> actors -> runtime",
        ),
        (
            "supervisor/runtime/leak.py",
            "import actors.model\n",
            "The runtime knows nothing of etcd or the domain",
        ),
        (
            "actors/backup/delta_verify.py",  # a helper the delta actor imports: a chain climbs too
            "import actors.cluster\n",
            "Layers inside actors: children never import the cluster actor",
        ),
        (
            "actors/maintenance/actor.py",
            "import actors.backup.actor\n",
            "Layers inside actors: children never import the cluster actor",
        ),
        (
            "actors/plan/leak.py",
            "import actors.cluster_context\n",
            "Layers inside actors: children never import the cluster actor",
        ),
    ],
)
def test_a_forbidden_import_breaks_its_contract(tmp_path, module, source, contract):
    result = lint_copy(tmp_path, {module: source})
    assert result.returncode != 0
    assert f"{contract} BROKEN" in result.stdout

"""Regenerate the betterproto package under proto/etcd from the .proto files in proto/src.

Run with `make proto` (or `python proto/generate.py [OUTPUT_DIR]`). The output is committed;
tests/etcd/test_proto_fresh.py regenerates into a temporary directory and fails when the
committed package is stale.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
SOURCE_DIR = PROTO_ROOT / "src"
PACKAGE_DIR = PROTO_ROOT / "etcd"


def proto_sources() -> list[Path]:
    return sorted(SOURCE_DIR.rglob("*.proto"))


def generate(output_dir: Path) -> None:
    """Write the generated package into ``output_dir`` (replacing what was there)."""
    with tempfile.TemporaryDirectory() as scratch:
        scratch_dir = Path(scratch)
        # The betterproto plugin is found on PATH next to this interpreter.
        plugin = Path(sys.executable).parent / "protoc-gen-python_betterproto"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"--plugin=protoc-gen-python_betterproto={plugin}",
                f"-I{SOURCE_DIR}",
                f"--python_betterproto_out={scratch_dir}",
                *(str(p.relative_to(SOURCE_DIR)) for p in proto_sources()),
            ],
            check=True,
            cwd=SOURCE_DIR,
        )
        if output_dir.exists():
            shutil.rmtree(output_dir)
        shutil.copytree(scratch_dir, output_dir)


def main(argv: list[str]) -> int:
    output_dir = Path(argv[1]) if len(argv) > 1 else PACKAGE_DIR
    generate(output_dir)
    print(f"generated {output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""How the benchmarks print a figure: its median over the runs, the range, and a note."""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import trio


def median_line(label: str, values: Sequence[float], note: str = "", width: int = 38) -> str:
    """ "  label   1.23 s  [1.01..1.50]  note" """
    spread = f"[{min(values):.2f}..{max(values):.2f}]"
    return f"  {label:<{width}} {statistics.median(values):6.2f} s  {spread:<13} {note}"


def write_result(name: str, result: object) -> Path:
    """Write a bench's figures to bench/results/<name>.json (what CI and notes quote)."""
    out = Path(__file__).resolve().parent / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return out


def run_in_fresh_dirs(
    one_run: Callable[[Path], Awaitable[dict[str, float]]], runs: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """`one_run` `runs` times, each in a temporary directory of its own and a trio run of its
    own: every figure's samples, and their medians."""
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as workdir:
            for key, value in trio.run(one_run, Path(workdir)).items():
                samples.setdefault(key, []).append(value)
    return samples, {key: statistics.median(values) for key, values in samples.items()}

"""How the benchmarks print a figure: its median over the runs, the range, and a note."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def median_line(label: str, values: Sequence[float], note: str = "", width: int = 38) -> str:
    """ "  label   1.23 s  [1.01..1.50]  note" """
    spread = f"[{min(values):.2f}..{max(values):.2f}]"
    return f"  {label:<{width}} {statistics.median(values):6.2f} s  {spread:<13} {note}"

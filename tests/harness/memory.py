"""This process's memory, as the memory tests and benches measure it: the growth of its peak
RSS (VmHWM, reset to the current RSS through /proc/self/clear_refs) over a stretch of work."""

from __future__ import annotations

import re
from pathlib import Path


def status_kib(field: str) -> int:
    """A /proc/self/status figure in KiB (VmRSS, VmHWM)."""
    found = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    assert found, field
    return int(found.group(1))


def reset_peak() -> int:
    """VmHWM := VmRSS; returns that RSS (KiB), the base a later peak is measured against."""
    Path("/proc/self/clear_refs").write_text("5")
    return status_kib("VmRSS")

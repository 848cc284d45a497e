"""The last error etcd wrote to its log before it exited, for the status and the Events.

etcd logs one JSON object per line ({"level":"fatal","msg":...,"error":...}); an etcd that dies
before its logger starts (a bad flag) writes plain text. Either way the last error-level line
is what a person needs first.
"""

from __future__ import annotations

import json
from pathlib import Path

# Only the end of the log is read: enough for the last lines, cheap for a large log.
TAIL_BYTES = 64 * 1024
MAX_LENGTH = 300
_ERROR_LEVELS = {"error", "fatal", "panic", "dpanic"}


def last_error_line(log_file: Path) -> str:
    """ "etcd: <msg>: <error>" from the log's last error-level line; "" when there is none."""
    try:
        with log_file.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        found = _error_of(line.strip())
        if found:
            return found[:MAX_LENGTH]
    return ""


def _error_of(line: str) -> str:
    if not line:
        return ""
    try:
        entry = json.loads(line)
    except ValueError:
        # Plain text: flag parsing and early start-up failures.
        lowered = line.lower()
        return f"etcd: {line}" if "error" in lowered or "invalid" in lowered or "fatal" in lowered else ""
    if not isinstance(entry, dict) or entry.get("level") not in _ERROR_LEVELS:
        return ""
    message = str(entry.get("msg", "")).strip()
    error = entry.get("error")
    return f"etcd: {message}: {error}" if error else f"etcd: {message}"

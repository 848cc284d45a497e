"""Finding the processes a test left behind, by what their command lines mention; stopping one
that a test started."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


def pids_mentioning(*words: str) -> list[int]:
    """Processes (not this one) whose command line contains every one of `words`."""
    wanted = [w.encode() for w in words]
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if all(w in cmdline for w in wanted):
            pids.append(int(entry.name))
    return pids


def etcd_pids_under(path: Path) -> list[int]:
    """etcd processes whose command line names something under `path` (a data dir, say)."""
    return pids_mentioning("etcd", str(path))


def kill_all_mentioning(*words: str) -> None:
    """SIGKILL every process `pids_mentioning(*words)` finds: what a test left behind, pass or fail."""
    for pid in pids_mentioning(*words):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stop(proc: subprocess.Popen[bytes], grace: float = 20) -> None:
    """SIGTERM, then SIGKILL after `grace` seconds; reaped either way."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

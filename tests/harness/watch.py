"""Time what the API server shows, to the event: ``kubectl get --watch`` with one line per event.

Polling with ``kubectl get`` costs a process start and a round trip per look (~0.15 s here), so
a poll loop notices a change up to a whole iteration late, and a loop that makes two calls
(pods, then the cluster) is later than one that makes one. A watch stamps each event as it
arrives, the same way for the static pods and for the operator's cluster, so their ratio
compares the clusters and not the polling.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.harness.kube import require_binaries

# kubectl -v=6 logs each request once its response headers arrive: this one is the watch.
WATCH_OPEN = "watch=true"


class KubectlWatch:
    """``kubectl get ARGS --watch -o jsonpath=TEMPLATE``; every printed line with its arrival time.

    Use as a context manager; entering returns once the watch is open (after the initial
    listing), so nothing applied afterwards can be missed; `until(check)` waits for the first line after
    which `check(lines)` holds and returns its arrival time (time.monotonic()).
    """

    def __init__(self, kubeconfig: Path, args: Sequence[str], template: str) -> None:
        self._cmd = [
            str(require_binaries().kubectl),
            f"--kubeconfig={kubeconfig}",
            "get",
            *args,
            "--watch",
            "-v=6",
            "-o",
            f"jsonpath={template}",
        ]
        self._env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        self._env["KUBECACHEDIR"] = str(kubeconfig.parent / ".kubecache")
        self._lines: queue.Queue[tuple[float, str] | None] = queue.Queue()
        self._listed = threading.Event()
        self.lines: list[str] = []
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> KubectlWatch:
        self._proc = subprocess.Popen(
            self._cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, env=self._env
        )
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        if not self._listed.wait(30):
            raise AssertionError(f"{' '.join(self._cmd)}: the watch did not open within 30s")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)

    def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put((time.monotonic(), line.rstrip("\n")))
        self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            if WATCH_OPEN in line:
                self._listed.set()

    def until(self, what: str, check: Callable[[list[str]], bool], timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                seen = self.lines[-5:]
                raise AssertionError(f"{timeout:.0f}s waiting for {what}; saw {seen}") from None
            if item is None:
                raise AssertionError(f"the watch for {what} ended; saw {self.lines[-5:]}")
            at, line = item
            self.lines.append(line)
            if check(self.lines):
                return at

    def drain(self) -> list[str]:
        """Every line that arrived so far, without waiting."""
        while True:
            try:
                item = self._lines.get_nowait()
            except queue.Empty:
                return self.lines
            if item is not None:
                self.lines.append(item[1])

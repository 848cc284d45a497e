"""OS-level pieces of running etcd: spawning tied to our life, waiting on exit, reaping strays, ports.

Linux only (prctl, pidfd, /proc), which is where the local runtime is meant to run.
"""

from __future__ import annotations

import ctypes
import logging
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import trio

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def spawn_tied_to_this_thread(
    argv: Sequence[str], *, log_file: Path, cwd: Path, env: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    """Start a process that the kernel SIGKILLs as soon as the calling thread dies.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process. That
    is why this is called from the trio thread itself, never through trio.lowlevel.open_process
    (which forks in a worker thread that the thread cache retires after a few idle seconds and
    would take etcd with it). A short blocking fork+exec on the trio thread is the price.
    start_new_session keeps a terminal's Ctrl-C away from etcd: we stop members in order instead.
    """
    parent = os.getpid()

    def die_with_parent() -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl; then nobody would ever kill us.
        if os.getppid() != parent:
            os._exit(1)

    with open(log_file, "ab") as out:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            preexec_fn=die_with_parent,
            close_fds=True,
        )


async def wait_exit(popen: subprocess.Popen[bytes]) -> int:
    """Wait for a child to exit without a thread per process, via a pidfd of our own (so several
    waiters, e.g. the watcher task and a shielded stop, never share a descriptor)."""
    if popen.poll() is not None:
        return popen.returncode
    try:
        fd = os.pidfd_open(popen.pid)
    except ProcessLookupError:
        return popen.wait()
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        trio.lowlevel.notify_closing(fd)
        os.close(fd)
    return popen.wait()


# --- strays from a previous daemon -----------------------------------------------------------


def pid_is_alive(pid: int) -> bool:
    """True while pid exists and is not a zombie (a zombie holds no ports and no files)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # Field 3, after the parenthesised command name (which may itself contain spaces or parens).
    return stat[stat.rfind(")") + 2 :].split(" ", 1)[0] not in ("Z", "X")


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def data_dirs_of(argv: Sequence[str]) -> Iterator[str]:
    """The --data-dir values of an etcd command line, in either flag spelling."""
    for i, arg in enumerate(argv):
        if arg.startswith("--data-dir="):
            yield arg.split("=", 1)[1]
        elif arg == "--data-dir" and i + 1 < len(argv):
            yield argv[i + 1]


def processes_using_data_dirs_under(root: Path) -> Iterator[int]:
    """Pids of live processes whose --data-dir lies inside root."""
    root = root.resolve()
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        for data_dir in data_dirs_of(_cmdline(pid)):
            path = Path(data_dir)
            if path.is_absolute() and path.resolve().is_relative_to(root) and pid_is_alive(pid):
                yield pid
                break


def kill_and_wait(pids: Iterable[int], *, timeout: float = 5.0) -> list[int]:
    """SIGKILL each pid and wait (blocking, briefly) until it is gone. Returns the pids killed.

    Only used at runtime open, before any member runs: a stray etcd holds the ports and the
    data dir's lock that our member is about to need, so it must be gone first.
    """
    killed = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    for pid in killed:
        while pid_is_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if pid_is_alive(pid):
            log.warning("stale etcd pid %d survived SIGKILL for %.0f s", pid, timeout)
    return killed


# --- ports -----------------------------------------------------------------------------------


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_free_ports(count: int, *, taken: set[int]) -> list[int]:
    """Ports free on 127.0.0.1 now and not promised to another member.

    Chosen below the kernel's ephemeral range: a port from bind(0) would be in that range,
    where any outgoing connection (etcd's own peer dials included) can grab it before etcd
    restarts and binds it again.
    """
    low, _ = _ephemeral_range()
    first, last = (20000, low - 1) if low > 21000 else (10000, 19999)
    candidates = list(range(first, last + 1))
    random.shuffle(candidates)
    chosen: list[int] = []
    for port in candidates:
        if port in taken or port in chosen or not _bindable(port):
            continue
        chosen.append(port)
        if len(chosen) == count:
            return chosen
    raise OSError(f"no {count} free loopback ports in {first}-{last}")

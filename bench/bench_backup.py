"""Backup throughput: the backup job (actors/backup/job.py take_backup: snapshot streamed from
etcd straight into the store, sha256 on the way, size and checksum compared) against the tools.

A single-member etcd (the daemon's default version) is loaded with --mib MiB of 1 MiB values.
Then, alternating, run after run:
- local store: take_backup into a local-directory store ÷ `etcdctl snapshot save` to a file;
- S3 (moto on loopback): take_backup into the S3 store ÷ `etcdctl snapshot save` alone, and ÷
  `etcdctl snapshot save` plus an upload of that file with the same S3 client (put_stream);
- verification: restoring the snapshot in a scratch member and hashing it (ScratchVerifier),
  reported as seconds per GiB of snapshot.
Ratios are baseline seconds ÷ ours (1.0 = as fast; target >= 0.9). Writes bench/results/backup.json.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import trio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from actors.backup.job import take_backup  # noqa: E402
from actors.model import (  # noqa: E402
    DEFAULT_VERSION,
    ClusterRef,
    LocalStore,
    MemberUrls,
    ProcessState,
    RuntimeMember,
    S3Store,
    StoreSpec,
)
from actors.observed import Observed  # noqa: E402
from actors.store_port import ObjectStore, S3Credentials  # noqa: E402
from bench.bench_snapshot import fill  # noqa: E402
from bench.report import write_result  # noqa: E402
from supervisor.aio import open_asyncio_loop  # noqa: E402
from supervisor.etcd.admin import EtcdAdminAdapter  # noqa: E402
from supervisor.local.scratch import ScratchVerifier  # noqa: E402
from supervisor.stores import open_store  # noqa: E402
from tests.harness.etcd_versions import cache_dir  # noqa: E402
from tests.harness.objstore import open_moto_server  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
BIN = cache_dir(DEFAULT_VERSION)  # the etcd the daemon runs by default
SOURCE = ClusterRef("bench", "source")


def start_etcd(workdir: Path) -> tuple[subprocess.Popen, str]:
    from bench.static_etcd import free_port

    peer, client = free_port(), free_port()
    proc = subprocess.Popen(
        [
            str(BIN / "etcd"), "--name=m0", f"--data-dir={workdir / 'm0'}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--listen-client-urls=http://127.0.0.1:{client}", f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--initial-cluster=m0=http://127.0.0.1:{peer}", f"--quota-backend-bytes={8 * GiB}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return proc, f"http://127.0.0.1:{client}"


def wait_healthy(endpoint: str, within: float = 120.0) -> None:
    deadline = time.monotonic() + within
    probe = [str(BIN / "etcdctl"), f"--endpoints={endpoint}", "endpoint", "health", "--command-timeout=1s"]
    while subprocess.run(probe, capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"etcd at {endpoint} not healthy within {within} s")
        time.sleep(0.02)


async def observed_single(admin: EtcdAdminAdapter, endpoint: str) -> Observed:
    """What the cluster actor would have seen of the one member: a healthy voter."""
    members = tuple(await admin.member_list([endpoint]))
    health = await admin.member_health(endpoint)
    runtime = RuntimeMember("m0", MemberUrls(members[0].peer_urls[0], endpoint), ProcessState.RUNNING, True)
    return Observed(SOURCE, (runtime,), members, {"m0": health})


def timed_backup(endpoint: str, open_target: Callable[[], ObjectStore]) -> tuple[float, int]:
    async def run() -> tuple[float, int]:
        async with open_asyncio_loop():
            admin = EtcdAdminAdapter(tls=None, call_timeout=600)
            store = open_target()
            try:
                observed = await observed_single(admin, endpoint)
                started = time.perf_counter()
                outcome = await take_backup(observed, admin, store, verifier=None)
                return time.perf_counter() - started, outcome.size
            finally:
                await store.aclose()
                await admin.aclose()

    return trio.run(run)


def etcdctl_save(endpoint: str, path: Path) -> float:
    started = time.perf_counter()
    argv = [str(BIN / "etcdctl"), f"--endpoints={endpoint}", "snapshot", "save", str(path)]
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - started


async def file_chunks(path: Path) -> AsyncIterator[bytes]:
    async with await trio.open_file(path, "rb") as f:
        while chunk := await f.read(MiB):
            yield chunk


def timed_upload(open_target: Callable[[], ObjectStore], path: Path, key: str) -> float:
    async def run() -> float:
        store = open_target()
        try:
            started = time.perf_counter()
            await store.put_stream(key, file_chunks(path))
            return time.perf_counter() - started
        finally:
            await store.aclose()

    return trio.run(run)


def timed_verification(work: Path, snapshot: Path) -> float:
    async def run() -> float:
        verifier = ScratchVerifier(work / "scratch", BIN / "etcd")
        async with open_asyncio_loop():
            started = time.perf_counter()
            await verifier.restored_hash(file_chunks(snapshot))
            return time.perf_counter() - started

    return trio.run(run)


def summary(name: str, ours: list[float], baseline: list[float], target: float | None = 0.9) -> dict:
    ratio = statistics.median(baseline) / statistics.median(ours)
    print(
        f"{name}: median ours {statistics.median(ours):.2f} s, baseline {statistics.median(baseline):.2f} s, "
        f"ratio {ratio:.2f}" + (f" (target >= {target})" if target else "")
    )
    return {
        "ours_seconds": [round(s, 3) for s in ours],
        "baseline_seconds": [round(s, 3) for s in baseline],
        "ratio": round(ratio, 3),
        "target_ratio": target,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=256, help="data to load, in MiB")
    parser.add_argument("--runs", type=int, default=3, help="runs of each method")
    args = parser.parse_args()
    results: dict = {"etcd_version": DEFAULT_VERSION, "loaded_mib": args.mib, "runs": args.runs}
    with tempfile.TemporaryDirectory(prefix="bench-backup-") as tmp:
        work = Path(tmp)
        proc, endpoint = start_etcd(work / "etcd")
        try:
            wait_healthy(endpoint)
            started = time.perf_counter()
            trio.run(fill, endpoint, args.mib, 4)
            print(f"loaded {args.mib} MiB in {time.perf_counter() - started:.1f}s")
            local_dir = work / "store"

            def local() -> ObjectStore:
                return open_store(StoreSpec(local=LocalStore(str(local_dir))), credentials=None)

            ours, saves = [], []
            for run in range(args.runs):
                seconds, size = timed_backup(endpoint, local)
                ours.append(seconds)
                saves.append(etcdctl_save(endpoint, work / f"save-{run}.db"))
                print(f"local run {run}: backup {size / MiB:.0f} MiB {ours[-1]:.2f}s, save {saves[-1]:.2f}s")
                (work / f"save-{run}.db").unlink()
                for path in local_dir.rglob("*.db*"):
                    path.unlink()
            results["snapshot_mib"] = round(size / MiB, 1)
            results["local_vs_etcdctl_save"] = summary("local store ÷ etcdctl save", ours, saves)

            (work / "moto").mkdir()
            with open_moto_server(work / "moto") as server:
                bucket = server.create_bucket("bench")
                spec = StoreSpec(s3=S3Store(bucket=bucket, endpoint=server.endpoint, region="us-east-1"))
                creds = S3Credentials(server.access_key_id, server.secret_access_key)

                def s3() -> ObjectStore:
                    return open_store(spec, credentials=creds)

                ours, saves, save_uploads = [], [], []
                for run in range(args.runs):
                    ours.append(timed_backup(endpoint, s3)[0])
                    path = work / f"save-{run}.db"
                    saves.append(etcdctl_save(endpoint, path))
                    save_uploads.append(saves[-1] + timed_upload(s3, path, f"uploaded-{run}.db"))
                    path.unlink()
                    print(
                        f"s3 run {run}: backup {ours[-1]:.2f}s, etcdctl save {saves[-1]:.2f}s, "
                        f"save + upload {save_uploads[-1]:.2f}s"
                    )
                results["s3_vs_etcdctl_save"] = summary("s3 ÷ etcdctl save", ours, saves)
                results["s3_vs_save_and_upload"] = summary("s3 ÷ etcdctl save + upload", ours, save_uploads)

            snapshot = work / "verify.db"
            etcdctl_save(endpoint, snapshot)
            seconds = [timed_verification(work, snapshot) for _ in range(args.runs)]
            gib = snapshot.stat().st_size / GiB
            per_gib = statistics.median(seconds) / gib
            median = statistics.median(seconds)
            print(f"verification: median {median:.2f} s for {gib * 1024:.0f} MiB = {per_gib:.1f} s/GiB")
            results["verification"] = {
                "seconds": [round(s, 3) for s in seconds],
                "snapshot_mib": round(gib * 1024, 1),
                "seconds_per_gib": round(per_gib, 2),
            }
        finally:
            proc.kill()
            proc.wait()
    out = write_result("backup", results)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

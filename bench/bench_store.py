"""Object-store upload throughput: put_stream vs the plain tool for the same file, same run.

A 256 MiB file of random bytes is uploaded through ObjectStore.put_stream (read in 1 MiB chunks
by trio, as a snapshot stream arrives) to
- the local store (temporary file, fsync, rename) ÷ a plain copy of the file, fsynced too (the
  kernel copies it: no user-space pass, no checksum), and ÷ a copy that computes the sha256;
- S3 (moto's server on loopback, authentication on) ÷ boto3's upload_file of the same file to
  the same server (its defaults: 8 MiB parts, 10 threads).
Runs alternate; prints every run, the medians and ratios (baseline seconds ÷ ours: 1.0 = as
fast), and writes bench/results/store.json.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import trio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from actors.model import LocalStore, S3Store, StoreSpec  # noqa: E402
from actors.store_port import ObjectStore, S3Credentials  # noqa: E402
from bench.report import write_result  # noqa: E402
from supervisor.stores import open_store  # noqa: E402
from tests.harness.objstore import S3Server, open_moto_server  # noqa: E402

MiB = 1 << 20


def make_file(path: Path, size_mib: int) -> None:
    with path.open("wb") as f:
        for _ in range(size_mib):
            f.write(os.urandom(MiB))


async def file_chunks(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as f:
        while chunk := await trio.to_thread.run_sync(f.read, MiB):
            yield chunk


def timed_put(store: ObjectStore, source: Path, key: str) -> float:
    async def put() -> float:
        started = time.perf_counter()
        stored = await store.put_stream(key, file_chunks(source))
        elapsed = time.perf_counter() - started
        assert stored.size > 0
        return elapsed

    return trio.run(put)


def plain_copy(source: Path, target: Path) -> float:
    started = time.perf_counter()
    shutil.copyfile(source, target)
    with target.open("rb+") as f:
        os.fsync(f.fileno())
    return time.perf_counter() - started


def hashed_copy(source: Path, target: Path) -> float:
    """A copy that also computes the sha256, as put_stream does (and as a snapshot save verifies)."""
    started = time.perf_counter()
    digest = hashlib.sha256()
    with source.open("rb") as src, target.open("wb") as dst:
        while chunk := src.read(MiB):
            digest.update(chunk)
            dst.write(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    return time.perf_counter() - started


def boto3_upload(server: S3Server, bucket: str, source: Path, key: str) -> float:
    client = server.boto3_client()
    started = time.perf_counter()
    client.upload_file(str(source), bucket, key)
    return time.perf_counter() - started


def compare(
    name: str, runs: int, ours: Callable[[int], float], baseline: Callable[[int], float], mib: int
) -> dict:
    ours_s, base_s = [], []
    for i in range(runs):
        ours_s.append(ours(i))
        base_s.append(baseline(i))
        print(f"{name} run {i}: put_stream {mib / ours_s[-1]:.0f} MB/s, baseline {mib / base_s[-1]:.0f} MB/s")
    ratio = statistics.median(base_s) / statistics.median(ours_s)
    ours_m, base_m = statistics.median(ours_s), statistics.median(base_s)
    print(f"{name}: median put_stream {ours_m:.2f} s, baseline {base_m:.2f} s, ratio {ratio:.2f}")
    return {"put_stream_seconds": ours_s, "baseline_seconds": base_s, "ratio": round(ratio, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results: dict = {"size_mib": args.size_mib, "runs": args.runs}
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        work = Path(tmp)
        source = work / "snapshot.db"
        make_file(source, args.size_mib)
        local = open_store(StoreSpec(local=LocalStore(str(work / "store"))), credentials=None)
        baselines = {"local": plain_copy, "local_vs_hashed_copy": hashed_copy}
        for name, baseline in baselines.items():
            (work / "copies").mkdir()
            results[name] = compare(
                name,
                args.runs,
                lambda i: timed_put(local, source, f"run-{i}.db"),
                lambda i, copy=baseline: copy(source, work / "copies" / f"run-{i}.db"),
                args.size_mib,
            )
            shutil.rmtree(work / "store")
            shutil.rmtree(work / "copies")
        (work / "moto").mkdir()
        with open_moto_server(work / "moto") as server:
            bucket = server.create_bucket("bench")
            spec = StoreSpec(s3=S3Store(bucket=bucket, endpoint=server.endpoint))
            s3 = open_store(spec, credentials=S3Credentials(server.access_key_id, server.secret_access_key))
            results["s3_moto"] = compare(
                "s3 (moto)",
                args.runs,
                lambda i: timed_put(s3, source, f"ours-{i}.db"),
                lambda i: boto3_upload(server, bucket, source, f"boto3-{i}.db"),
                args.size_mib,
            )
    out = write_result("store", results)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

"""What compression and encryption cost a backup: the backup job (actors/backup/job.py
take_backup) of the same etcd into the same store, plain ÷ zstd ÷ zstd + AES-256-GCM
(actors/backup/encoded_store.py), and reading each object back as a restore does.

A single-member etcd (the daemon's default version) is loaded with --mib MiB of etcd-like values
(JSON objects with names, labels and some random bytes: they compress about as Kubernetes
objects do; --random for incompressible 1 MiB values). Then, alternating the three forms run
after run, each form's backup into a local-directory store (--s3: moto's S3 server) and its
read-back (get_stream drained, as a restore fetches it). Reported per form: the median seconds
and MiB/s of snapshot, the ratio against the plain run (plain seconds ÷ this form's: 1.0 = as
fast), the stored size ÷ snapshot size, and the peak RSS growth of this process while streaming
(VmHWM reset through /proc/self/clear_refs before each run). Writes
bench/results/backup_crypto.json (backup_crypto_random.json with --random).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import trio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from actors.backup.encoded_store import EncodedStore, Encoding  # noqa: E402
from actors.backup.job import take_backup  # noqa: E402
from actors.backup.keys import KeyRing, key_ring_from, no_keys  # noqa: E402
from actors.model import DEFAULT_VERSION, Compression, LocalStore, S3Store, StoreSpec  # noqa: E402
from actors.store_port import ObjectStore, S3Credentials  # noqa: E402
from bench.bench_backup import observed_single, start_etcd, wait_healthy  # noqa: E402
from bench.bench_snapshot import fill  # noqa: E402
from bench.report import write_result  # noqa: E402
from supervisor.aio import open_asyncio_loop  # noqa: E402
from supervisor.etcd.admin import EtcdAdminAdapter  # noqa: E402
from supervisor.etcd.client import open_etcd_client  # noqa: E402
from supervisor.stores import open_store  # noqa: E402
from tests.harness.memory import reset_peak, status_kib  # noqa: E402
from tests.harness.objstore import open_moto_server  # noqa: E402

MiB = 1 << 20
KEYS = key_ring_from({"key": base64.b64encode(os.urandom(32)).decode()}, "bench key")
FORMS: dict[str, tuple[Compression, KeyRing | None]] = {
    "plain": (Compression.NONE, None),
    "zstd": (Compression.ZSTD, None),
    "zstd+aes": (Compression.ZSTD, KEYS),
}


def etcd_like(rng: random.Random, size: int) -> bytes:
    """JSON objects shaped like the ones etcd holds for Kubernetes: repeated field names, names
    with counters, a little randomness (uids, hashes)."""
    items, total = [], 0
    while total < size:
        n = rng.randrange(1_000_000)
        item = json.dumps({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"app-{n}", "namespace": f"team-{n % 50}", "uid": rng.randbytes(16).hex(),
                         "labels": {"app.kubernetes.io/name": f"app-{n % 300}", "tier": "backend"},
                         "resourceVersion": str(rng.randrange(10**9))},
            "data": {"config.yaml": f"replicas: {n % 7}\nimage: registry.local/app:{n % 90}\n" * 4,
                     "checksum": rng.randbytes(24).hex()},
        })  # fmt: skip
        items.append(item)
        total += len(item)
    return "\n".join(items).encode()[:size]


async def fill_etcd_like(endpoint: str, total_mib: int, writers: int = 4) -> None:
    per_value = 64 * 1024

    async def writer(first: int) -> None:
        rng = random.Random(first)
        async with open_etcd_client([endpoint], call_timeout=60) as client:
            for i in range(first, total_mib * MiB // per_value, writers):
                await client.put(f"/registry/configmaps/{i:08d}".encode(), etcd_like(rng, per_value))

    async with open_asyncio_loop(), trio.open_nursery() as nursery:
        for w in range(writers):
            nursery.start_soon(writer, w)


def wrapped(store: ObjectStore, form: str) -> ObjectStore:
    compression, ring = FORMS[form]

    async def keys() -> KeyRing:
        return ring or no_keys("")

    return EncodedStore(store, Encoding(compression, "bench-key" if ring else None), keys)


def timed(endpoint: str, open_target: Callable[[], ObjectStore], form: str) -> dict[str, float]:
    """One backup of `form` and its read-back: seconds, sizes, peak RSS growth (MiB)."""

    async def run() -> dict[str, float]:
        async with open_asyncio_loop():
            admin = EtcdAdminAdapter(tls=None, call_timeout=600)
            store = wrapped(open_target(), form)
            try:
                observed = await observed_single(admin, endpoint)
                before = reset_peak()
                started = time.perf_counter()
                outcome = await take_backup(observed, admin, store, verifier=None)
                backup = time.perf_counter() - started
                backup_rss = (status_kib("VmHWM") - before) / 1024
                before = reset_peak()
                started = time.perf_counter()
                read = 0
                async for chunk in store.get_stream(outcome.key):
                    read += len(chunk)
                restore = time.perf_counter() - started
                restore_rss = (status_kib("VmHWM") - before) / 1024
                assert read == outcome.snapshot_size
                await store.delete(outcome.key)
                await store.delete(f"{outcome.key}.json")
                return {
                    "backup": backup, "read": restore, "backup_rss": backup_rss, "read_rss": restore_rss,
                    "stored": outcome.size, "snapshot": outcome.snapshot_size,
                }  # fmt: skip
            finally:
                await store.aclose()
                await admin.aclose()

    return trio.run(run)


def summarize(runs: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, object]]:
    def median(form: str, what: str) -> float:
        return statistics.median(r[what] for r in runs[form])

    snapshot_mib = runs["plain"][0]["snapshot"] / MiB
    out: dict[str, dict[str, object]] = {}
    for form in FORMS:
        backup, read = median(form, "backup"), median(form, "read")
        out[form] = {
            "backup_seconds": [round(r["backup"], 3) for r in runs[form]],
            "backup_mib_per_s": round(snapshot_mib / backup, 1),
            "backup_ratio_vs_plain": round(median("plain", "backup") / backup, 3),
            "read_seconds": [round(r["read"], 3) for r in runs[form]],
            "read_mib_per_s": round(snapshot_mib / read, 1),
            "read_ratio_vs_plain": round(median("plain", "read") / read, 3),
            "stored_over_snapshot": round(median(form, "stored") / median(form, "snapshot"), 3),
            "peak_rss_growth_mib": {
                "backup": round(max(r["backup_rss"] for r in runs[form]), 1),
                "read": round(max(r["read_rss"] for r in runs[form]), 1),
            },
        }
        o = out[form]
        print(
            f"  {form:<9} backup {backup:6.2f} s {o['backup_mib_per_s']:7.1f} MiB/s"
            f" ratio {o['backup_ratio_vs_plain']:.2f}"
            f" | read {read:6.2f} s ratio {o['read_ratio_vs_plain']:.2f}"
            f" | stored/snapshot {o['stored_over_snapshot']:.2f} | peak RSS +{o['peak_rss_growth_mib']} MiB"
        )
    return out


def measure(endpoint: str, open_target: Callable[[], ObjectStore], runs: int, where: str) -> dict:
    results: dict[str, list[dict[str, float]]] = {form: [] for form in FORMS}
    for run in range(runs):
        order = list(FORMS) if run % 2 == 0 else list(reversed(FORMS))  # no form always first
        for form in order:
            results[form].append(timed(endpoint, open_target, form))
        print(f"{where} run {run}: " + ", ".join(f"{f} {results[f][-1]['backup']:.2f}s" for f in FORMS))
    print(f"{where} (median of {runs}):")
    return summarize(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=256, help="data to load, in MiB")
    parser.add_argument("--runs", type=int, default=3, help="runs of each form")
    parser.add_argument("--random", action="store_true", help="incompressible 1 MiB values instead")
    parser.add_argument("--s3", action="store_true", help="also into moto's S3 server")
    args = parser.parse_args()
    results: dict = {
        "etcd_version": DEFAULT_VERSION, "loaded_mib": args.mib, "runs": args.runs,
        "data": "random" if args.random else "etcd-like JSON", "cpus": os.cpu_count(),
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-backup-crypto-") as tmp:
        work = Path(tmp)
        proc, endpoint = start_etcd(work / "etcd")
        try:
            wait_healthy(endpoint)
            started = time.perf_counter()
            if args.random:
                trio.run(fill, endpoint, args.mib, 4)
            else:
                trio.run(fill_etcd_like, endpoint, args.mib)
            print(f"loaded {args.mib} MiB in {time.perf_counter() - started:.1f}s")

            def local() -> ObjectStore:
                return open_store(StoreSpec(local=LocalStore(str(work / "store"))), credentials=None)

            results["local"] = measure(endpoint, local, args.runs, "local")
            if args.s3:
                (work / "moto").mkdir()
                with open_moto_server(work / "moto") as server:
                    bucket = server.create_bucket("bench")
                    spec = StoreSpec(s3=S3Store(bucket=bucket, endpoint=server.endpoint, region="us-east-1"))
                    creds = S3Credentials(server.access_key_id, server.secret_access_key)
                    results["s3"] = measure(
                        endpoint, lambda: open_store(spec, credentials=creds), args.runs, "s3"
                    )
        finally:
            proc.kill()
            proc.wait()
    out = write_result("backup_crypto_random" if args.random else "backup_crypto", results)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

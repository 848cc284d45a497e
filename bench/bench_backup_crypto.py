"""What compression and encryption cost a backup: the backup job (actors/backup/job.py
take_backup) of the same etcd into the same store, plain ÷ zstd ÷ zstd + AES-256-GCM
(actors/backup/encoded_store.py), and reading each object back as a restore does.

A single-member etcd (the daemon's default version) is loaded with --mib MiB of etcd-like values
(JSON objects with names, labels and some random bytes: they compress about as Kubernetes
objects do; --random for incompressible 1 MiB values). Then, alternating the three forms run
after run, each form's backup into a local-directory store (--s3: moto's S3 server) and its
read-back (get_stream drained, as a restore fetches it). Reported per form: the median seconds
and MiB/s of snapshot, the ratio against the plain run (plain seconds ÷ this form's: 1.0 = as
fast), this process's CPU seconds ÷ the plain run's (the encoding's own cost, whatever etcd,
moto and the machine's other work take), the stored size ÷ snapshot size, and the peak RSS
growth of this process while streaming (VmHWM reset through /proc/self/clear_refs before each
run). Writes bench/results/backup_crypto.json (backup_crypto_random.json with --random).

--restore (--mib 1024 for the issue's 1 GiB): the same etcd backed up plain into a local
directory, and zstd + AES-256-GCM into another local directory and into moto's S3; etcd is then
stopped, and alternating run after run: `etcdutl snapshot restore` of the plain file (the
floor), and the product's restore of each encoded backup, LocalRestorer.restore_seed as
spec.restore runs it (fetch, decrypt, decompress and hash into the member's directory, the
sha256 checked against the metadata, etcdutl snapshot restore into its data dir), each in a
Python process of its own. Reported: median seconds and CPU seconds (the restoring process and
its etcdutl), each ÷ the floor's (target <= 1.3), and the peak RSS of the restoring Python
process and of etcdutl (bbolt maps the whole database: its RSS is the file's pages).
Writes bench/results/restore_crypto.json.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
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
from bench.bench_backup import BIN, observed_single, start_etcd, wait_healthy  # noqa: E402
from bench.bench_snapshot import fill  # noqa: E402
from bench.report import median_line, write_result  # noqa: E402
from supervisor.aio import open_asyncio_loop  # noqa: E402
from supervisor.etcd.admin import EtcdAdminAdapter  # noqa: E402
from supervisor.etcd.client import open_etcd_client  # noqa: E402
from supervisor.stores import open_store  # noqa: E402
from tests.harness.memory import reset_peak, status_kib  # noqa: E402
from tests.harness.objstore import open_moto_server  # noqa: E402

MiB = 1 << 20
KEY_B64 = base64.b64encode(os.urandom(32)).decode()
KEYS = key_ring_from({"key": KEY_B64}, "bench key")
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
                cpu = cpu_seconds(resource.RUSAGE_SELF)
                started = time.perf_counter()
                outcome = await take_backup(observed, admin, store, verifier=None)
                backup = time.perf_counter() - started
                backup_cpu = cpu_seconds(resource.RUSAGE_SELF) - cpu
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
                    "backup": backup, "backup_cpu": backup_cpu, "read": restore, "backup_rss": backup_rss,
                    "read_rss": restore_rss,
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
            # This process's CPU seconds (the reader, the encoder, the store's client; not etcd's
            # nor moto's): what the form costs whatever else runs on the machine.
            "backup_cpu_seconds": [round(r["backup_cpu"], 3) for r in runs[form]],
            "backup_cpu_over_plain": round(median(form, "backup_cpu") / median("plain", "backup_cpu"), 3),
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
        spread = f"[{min(o['backup_seconds']):.2f}..{max(o['backup_seconds']):.2f}]"
        print(
            f"  {form:<9} backup {backup:6.2f} s {spread} {o['backup_mib_per_s']:7.1f} MiB/s"
            f" ratio {o['backup_ratio_vs_plain']:.2f}"
            f" CPU {median(form, 'backup_cpu'):.2f} s (x{o['backup_cpu_over_plain']:.2f})"
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


# --- restore: the product's restore path ÷ etcdutl snapshot restore of the plain file ---------

RESTORE_WAYS = ("etcdutl", "ours-s3", "ours-local")


def backup_into(endpoint: str, store: ObjectStore, form: str) -> str:
    """One backup of `form` (no verification) into `store`: its key."""

    async def run() -> str:
        async with open_asyncio_loop():
            admin = EtcdAdminAdapter(tls=None, call_timeout=600)
            target = wrapped(store, form)
            try:
                outcome = await take_backup(
                    await observed_single(admin, endpoint), admin, target, verifier=None
                )
                print(f"  {form} backup {outcome.key}: {outcome.snapshot_size / MiB:.0f} MiB snapshot, "
                      f"{outcome.size / MiB:.0f} MiB stored")  # fmt: skip
                return outcome.key
            finally:
                await target.aclose()
                await admin.aclose()

    return trio.run(run)


def restore_argv(data_dir: Path, snapshot: Path, tool: Path) -> list[str]:
    """The product's own etcdutl flags (supervisor/local/restore.py _etcdutl_restore)."""
    peer = "http://127.0.0.1:2380"
    return [
        str(tool), "snapshot", "restore", str(snapshot), f"--data-dir={data_dir}", "--name=m0",
        f"--initial-cluster=m0={peer}", f"--initial-advertise-peer-urls={peer}",
        "--initial-cluster-token=bench-restored",
    ]  # fmt: skip


def etcdutl_floor(snapshot: Path, work: Path) -> dict[str, float]:
    """`etcdutl snapshot restore` of the plain file: seconds and its peak RSS (MiB)."""
    data = work / "floor"
    with ChildPeak("etcdutl") as etcdutl:
        cpu = cpu_seconds(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(restore_argv(data, snapshot, BIN / "etcdutl"), capture_output=True, check=False)
        seconds = time.perf_counter() - started
        cpu = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    shutil.rmtree(data)
    return {"seconds": seconds, "cpu_seconds": cpu, "etcdutl_rss_mib": etcdutl.mib}


def cpu_seconds(who: int) -> float:
    used = resource.getrusage(who)
    return used.ru_utime + used.ru_stime


def ours(job: dict[str, object]) -> dict[str, float]:
    """The product's restore of `job`'s backup, in a Python process of its own (this script's
    --restore-child), so its peak RSS is the restore's alone."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--restore-child", json.dumps(job)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


class ChildPeak:
    """The peak RSS (VmHWM, MiB) of the one child of this process named `name` that runs while
    in the block, read from /proc (a child's rusage would count the pages of the parent it was
    forked from; this kernel has no /proc/<pid>/task/<tid>/children): the processes started
    since are looked at every 20 ms until it is found, then its status read every 5 ms until it
    exits (only its last few ms can be missed). `cpu`: the CPU seconds the watching itself took
    (not the restore's)."""

    def __init__(self, name: str) -> None:
        self._name, self._parent = name, str(os.getpid())
        self._seen = set(filter(str.isdigit, os.listdir("/proc")))  # processes not to look at
        self.mib = 0.0
        self.cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> ChildPeak:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        found: str | None = None
        tick = 0
        while not self._stop.wait(0.005):
            tick += 1
            if found is None and tick % 4 == 0:
                found = self._child()
            if found is not None:
                try:
                    hwm = re.search(r"^VmHWM:\s+(\d+) kB", Path(f"/proc/{found}/status").read_text(), re.M)
                except OSError:
                    hwm = None
                if hwm is None:  # gone (or a zombie): its peak is what was read last
                    break
                self.mib = max(self.mib, int(hwm.group(1)) / 1024)
        self.cpu = time.thread_time()

    def _child(self) -> str | None:
        for pid in set(filter(str.isdigit, os.listdir("/proc"))) - self._seen:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
            if rest[1] != self._parent:
                self._seen.add(pid)  # not ours: never looked at again
            elif comm == self._name:
                return pid
        return None  # (a child of ours not yet exec'd is looked at again)


def restore_child(job: dict) -> int:
    """LocalRestorer.restore_seed (supervisor/local/restore.py: fetch and decode from the store,
    sha256 checked against the metadata, etcdutl snapshot restore into the member's data dir),
    as spec.restore runs it for a new cluster's seed. Prints one JSON line."""
    from actors.model import BackupSpec, ClusterRef, ClusterSpec, EncryptionSpec, MemberLaunch, RestoreSpec
    from supervisor.local.backups import LocalKeyFiles
    from supervisor.local.etcd_builds import EtcdBuilds
    from supervisor.local.restore import LocalRestorer
    from supervisor.local.runtime import LocalRuntime

    store = job["store"]
    if "s3" in store:
        s3 = store["s3"]
        spec = StoreSpec(s3=S3Store(bucket=s3["bucket"], endpoint=s3["endpoint"], region="us-east-1"))
        creds: S3Credentials | None = S3Credentials(s3["access_key_id"], s3["secret_access_key"])
    else:
        spec, creds = StoreSpec(local=LocalStore(store["local"])), None
    cluster = ClusterRef("bench", "restored")
    backup = BackupSpec(encryption=EncryptionSpec("bench-key"), compression=Compression.ZSTD)
    spec_of_cluster = ClusterSpec(size=1, tls_enabled=False, backup=backup)
    state = Path(job["state"])

    async def run() -> dict[str, float]:
        async with trio.open_nursery() as nursery:
            runtime = LocalRuntime(state, EtcdBuilds(BIN.parent), nursery)
            restorer = LocalRestorer(
                runtime, lambda s: open_store(s, credentials=creds), keys=LocalKeyFiles(Path(job["keys_dir"]))
            )
            # As the RestoreFromBackup step does (actors/actions.py): the member's place, then its data.
            urls = await runtime.allocate_member(cluster, "m0", spec_of_cluster)
            launch = MemberLaunch(cluster, "m0", urls, (("m0", urls.peer_url),), "new", spec_of_cluster)
            before = reset_peak()
            with ChildPeak("etcdutl") as etcdutl:
                cpu = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN)
                started = time.perf_counter()
                restored = await restorer.restore_seed(launch, RestoreSpec(store=spec, key=job["key"]))
                seconds = time.perf_counter() - started
                cpu = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN) - cpu
            cpu -= etcdutl.cpu  # the watching's own
            peak = status_kib("VmHWM")
            assert restored.size == job["snapshot_size"], restored
            nursery.cancel_scope.cancel()
        return {
            "seconds": seconds,
            "cpu_seconds": cpu,
            "python_rss_mib": peak / 1024,
            "python_rss_growth_mib": (peak - before) / 1024,
            "etcdutl_rss_mib": etcdutl.mib,
        }

    try:
        print(json.dumps(trio.run(run)))
    finally:
        shutil.rmtree(state, ignore_errors=True)
    return 0


def restore_main(args: argparse.Namespace) -> int:
    mib = args.mib
    results: dict = {
        "etcd_version": DEFAULT_VERSION, "loaded_mib": mib, "runs": args.runs, "cpus": os.cpu_count(),
        "data": "random 1 MiB values" if args.random else "etcd-like JSON (64 KiB values)",
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-restore-crypto-") as tmp:
        work = Path(tmp)
        (work / "keys").mkdir()
        (work / "keys" / "bench-key").write_text(f"key={KEY_B64}\n")
        (work / "moto").mkdir()
        with open_moto_server(work / "moto") as server:
            bucket = server.create_bucket("bench")
            creds = S3Credentials(server.access_key_id, server.secret_access_key)
            s3_spec = StoreSpec(s3=S3Store(bucket=bucket, endpoint=server.endpoint, region="us-east-1"))
            proc, endpoint = start_etcd(work / "etcd")
            try:
                wait_healthy(endpoint)
                started = time.perf_counter()
                if args.random:
                    trio.run(fill, endpoint, mib, 4)
                else:
                    trio.run(fill_etcd_like, endpoint, mib)
                print(f"loaded {mib} MiB in {time.perf_counter() - started:.1f}s")
                plain_dir, encoded_dir = work / "plain", work / "encoded"
                plain_key = backup_into(
                    endpoint,
                    open_store(StoreSpec(local=LocalStore(str(plain_dir))), credentials=None),
                    "plain",
                )
                local_key = backup_into(
                    endpoint,
                    open_store(StoreSpec(local=LocalStore(str(encoded_dir))), credentials=None),
                    "zstd+aes",
                )
                s3_key = backup_into(endpoint, open_store(s3_spec, credentials=creds), "zstd+aes")
            finally:
                proc.kill()
                proc.wait()
            shutil.rmtree(work / "etcd")  # its 1 GiB out of the page cache's way
            snapshot = plain_dir / plain_key
            size = snapshot.stat().st_size
            results["snapshot_mib"] = round(size / MiB, 1)
            results["stored_mib"] = round((encoded_dir / local_key).stat().st_size / MiB, 1)
            common = {"keys_dir": str(work / "keys"), "state": str(work / "state"), "snapshot_size": size}
            jobs = {
                "ours-s3": common | {"key": s3_key, "store": {"s3": {
                    "bucket": bucket, "endpoint": server.endpoint,
                    "access_key_id": server.access_key_id, "secret_access_key": server.secret_access_key}}},
                "ours-local": common | {"key": local_key, "store": {"local": str(encoded_dir)}},
            }  # fmt: skip
            samples: dict[str, list[dict[str, float]]] = {way: [] for way in RESTORE_WAYS}
            for run in range(args.runs):
                order = RESTORE_WAYS if run % 2 == 0 else tuple(reversed(RESTORE_WAYS))
                for way in order:
                    samples[way].append(
                        etcdutl_floor(snapshot, work) if way == "etcdutl" else ours(jobs[way])
                    )
                print(
                    f"run {run}: " + ", ".join(f"{w} {samples[w][-1]['seconds']:.2f}s" for w in RESTORE_WAYS)
                )
    results |= summarize_restore(samples)
    out = write_result("restore_crypto_random" if args.random else "restore_crypto", results)
    print(f"wrote {out}")
    return 0


def summarize_restore(samples: dict[str, list[dict[str, float]]]) -> dict[str, object]:
    floor = statistics.median(s["seconds"] for s in samples["etcdutl"])
    floor_cpu = statistics.median(s["cpu_seconds"] for s in samples["etcdutl"])
    out: dict[str, object] = {"target_ratio": 1.3, "target_peak_rss_mb": 150}
    print(f"median of {len(samples['etcdutl'])} (ratio: this way's seconds ÷ etcdutl's; target <= 1.3):")
    for way, runs in samples.items():
        seconds = [s["seconds"] for s in runs]
        cpu = [s["cpu_seconds"] for s in runs]
        figures: dict[str, object] = {
            "seconds": [round(s, 2) for s in seconds],
            "ratio_vs_etcdutl": round(statistics.median(seconds) / floor, 3),
            "cpu_seconds": [round(s, 2) for s in cpu],
            "cpu_ratio_vs_etcdutl": round(statistics.median(cpu) / floor_cpu, 3),
        }
        for what in ("python_rss_mib", "python_rss_growth_mib", "etcdutl_rss_mib"):
            if what in runs[0]:
                figures[f"peak_{what}"] = round(max(s[what] for s in runs), 1)
        out[way] = figures
        rss = ", ".join(f"{k[5:]} {v}" for k, v in figures.items() if k.startswith("peak_"))
        ratio = (
            f"ratio {figures['ratio_vs_etcdutl']:.2f}; CPU {statistics.median(cpu):.2f} s,"
            f" ratio {figures['cpu_ratio_vs_etcdutl']:.2f};"
        )
        print(f"{median_line(way, seconds, ratio, width=12)} peak RSS MiB: {rss}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=256, help="data to load, in MiB")
    parser.add_argument("--runs", type=int, default=3, help="runs of each form")
    parser.add_argument("--random", action="store_true", help="incompressible 1 MiB values instead")
    parser.add_argument("--s3", action="store_true", help="also into moto's S3 server")
    parser.add_argument("--restore", action="store_true", help="the restore of a zstd+aes backup ÷ etcdutl's")
    parser.add_argument("--restore-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.restore_child:
        return restore_child(json.loads(args.restore_child))
    if args.restore:
        return restore_main(args)
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

"""Restore time: a new 3-member cluster from a snapshot of --gib GiB (default 1), through the
supervisor (spec.restore: fetch from the store with its sha256 checked, `etcdutl snapshot
restore` with a new cluster identity, start the seed, compare its HashKV with the backup's,
then grow by learners) against the floor: `etcdutl snapshot restore` of the same file plus
starting one etcd on it, until it answers `endpoint health`.

Reported, per run and as medians: the seed healthy (it answers `endpoint health`, as the floor
is timed), the restore step done (its HashKV compared: the RestoredFromBackup Event), and all
three members healthy; ratios are
ours ÷ the floor (target <= 1.2 for the seed); what the learners add is all-three minus the
restore step. The backup itself is taken by the backup job with verification on, so its
metadata carries the HashKV the restore compares; that verification's cost is reported too.
Writes bench/results/restore.json. 1 GiB takes a few minutes here; --gib 0.25 for a quick look.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from actors.backup.job import take_backup  # noqa: E402
from actors.cluster_context import Timing  # noqa: E402
from actors.model import (  # noqa: E402
    DEFAULT_VERSION,
    ClusterRef,
    ClusterResource,
    ClusterSpec,
    LocalStore,
    ProcessState,
    RestoreSpec,
    StoreSpec,
)
from bench.bench_backup import BIN, MiB, observed_single, start_etcd, wait_healthy  # noqa: E402
from bench.bench_snapshot import fill  # noqa: E402
from bench.report import write_result  # noqa: E402
from bench.static_etcd import free_port  # noqa: E402
from supervisor.aio import open_asyncio_loop  # noqa: E402
from supervisor.etcd.admin import EtcdAdminAdapter  # noqa: E402
from supervisor.local.backups import local_store_opener  # noqa: E402
from supervisor.local.embedded import is_healthy, open_local_supervisor  # noqa: E402
from supervisor.local.runtime import LocalRuntime  # noqa: E402
from supervisor.local.scratch import ScratchVerifier  # noqa: E402
from supervisor.stores import open_store  # noqa: E402


def backed_up(work: Path, endpoint: str, store: StoreSpec) -> tuple[str, float]:
    """A verified backup of the loaded member in `store`: its key, and the seconds it took."""

    async def run() -> tuple[str, float]:
        async with open_asyncio_loop():
            admin = EtcdAdminAdapter(tls=None, call_timeout=600)
            target = open_store(store, credentials=None)
            verifier = ScratchVerifier(work / "scratch", BIN / "etcd")
            try:
                started = time.perf_counter()
                outcome = await take_backup(
                    await observed_single(admin, endpoint), admin, target, verifier=verifier
                )
                assert outcome.verified, outcome
                return outcome.key, time.perf_counter() - started
            finally:
                await target.aclose()
                await admin.aclose()

    return trio.run(run)


def floor(snapshot: Path, workdir: Path) -> float:
    """etcdutl snapshot restore + one etcd started on it, until healthy."""
    peer, client = free_port(), free_port()
    data = workdir / "floor"
    started = time.perf_counter()
    subprocess.run(
        [
            str(BIN / "etcdutl"), "snapshot", "restore", str(snapshot), f"--data-dir={data}", "--name=m0",
            f"--initial-cluster=m0=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    proc = subprocess.Popen(
        [
            str(BIN / "etcd"), "--name=m0", f"--data-dir={data}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--listen-client-urls=http://127.0.0.1:{client}", f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--initial-cluster=m0=http://127.0.0.1:{peer}", "--quota-backend-bytes=8589934592",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_healthy(f"http://127.0.0.1:{client}", within=600)
        return time.perf_counter() - started
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


async def seed_answers(runtime: LocalRuntime, ref: ClusterRef) -> None:
    """Until a member of `ref` answers `endpoint health`: the seed serves (the floor's test)."""
    while True:
        for member in await runtime.list_members(ref):
            if member.state is ProcessState.RUNNING:
                probe = [str(BIN / "etcdctl"), f"--endpoints={member.urls.client_url}", "endpoint", "health"]
                done = await trio.run_process(
                    [*probe, "--command-timeout=1s"], capture_stdout=True, check=False
                )
                if done.returncode == 0:
                    return
        await trio.sleep(0.02)


def ours(work: Path, store: StoreSpec, key: str, run: int) -> dict[str, float]:
    """A new 3-member cluster restored from the backup by the supervisor: seconds to each mark."""
    ref = ClusterRef("bench", f"restored-{run}")
    spec = ClusterSpec(size=3, tls_enabled=False, restore=RestoreSpec(store=store, key=key))
    state = work / f"state-{run}"

    async def run_it() -> dict[str, float]:
        marks: dict[str, float] = {}
        async with open_local_supervisor(state, timing=Timing(), stores=local_store_opener(work, {})) as sup:
            started = time.perf_counter()
            await sup.fleet.apply([ClusterResource(ref, spec)])
            with trio.fail_after(1800):
                await seed_answers(sup.runtime, ref)
                marks["seed_healthy"] = time.perf_counter() - started
                await sup.wait_for(ref, lambda s: "RestoredFromBackup" in sup.recorder.reasons(ref))
                marks["restore_step_done"] = time.perf_counter() - started
                await sup.wait_for(ref, lambda s: is_healthy(s, 3))
                marks["all_healthy"] = time.perf_counter() - started
            assert "RestoreVerified" in sup.recorder.reasons(ref), sup.recorder.reasons(ref)
        return marks

    try:
        return trio.run(run_it)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=1.0, help="data to load, in GiB")
    parser.add_argument("--runs", type=int, default=3, help="runs of each way")
    args = parser.parse_args()
    mib = int(args.gib * 1024)
    results: dict = {"etcd_version": DEFAULT_VERSION, "loaded_mib": mib, "runs": args.runs}
    with tempfile.TemporaryDirectory(prefix="bench-restore-") as tmp:
        work = Path(tmp)
        store = StoreSpec(local=LocalStore(str(work / "store")))
        proc, endpoint = start_etcd(work / "etcd")
        try:
            wait_healthy(endpoint)
            started = time.perf_counter()
            trio.run(fill, endpoint, mib, 4)
            print(f"loaded {mib} MiB in {time.perf_counter() - started:.1f}s")
            key, backup_seconds = backed_up(work, endpoint, store)
        finally:
            proc.kill()
            proc.wait()
        snapshot = work / "store" / key
        size_mib = snapshot.stat().st_size / MiB
        print(f"backup of {size_mib:.0f} MiB, verified, in {backup_seconds:.1f}s")
        results |= {"snapshot_mib": round(size_mib, 1), "verified_backup_seconds": round(backup_seconds, 2)}
        floors, runs = [], []
        for run in range(args.runs):
            floors.append(floor(snapshot, work))
            runs.append(ours(work, store, key, run))
            marks = ", ".join(f"{name} {seconds:.2f}s" for name, seconds in runs[-1].items())
            print(f"run {run}: floor (etcdutl restore + one etcd) {floors[-1]:.2f}s; ours: {marks}")
    base = statistics.median(floors)
    medians = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
    results |= {
        "floor_seconds": [round(s, 2) for s in floors],
        "ours": [{k: round(v, 2) for k, v in r.items()} for r in runs],
        "seed_ratio": round(medians["seed_healthy"] / base, 3),
        "restore_step_ratio": round(medians["restore_step_done"] / base, 3),
        "all_healthy_ratio": round(medians["all_healthy"] / base, 3),
        "learners_add_seconds": round(medians["all_healthy"] - medians["restore_step_done"], 2),
        "target_seed_ratio": 1.2,
    }
    print(
        f"median floor {base:.2f}s; seed healthy {medians['seed_healthy']:.2f}s "
        f"(ratio {results['seed_ratio']:.2f}, target <= 1.2), "
        f"restore step done {medians['restore_step_done']:.2f}s "
        f"(ratio {results['restore_step_ratio']:.2f}), all three healthy {medians['all_healthy']:.2f}s "
        f"(ratio {results['all_healthy_ratio']:.2f}): the learners add {results['learners_add_seconds']:.2f}s"
    )
    out = write_result("restore", results)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

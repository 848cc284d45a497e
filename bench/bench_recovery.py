"""Quorum-loss recovery timings on the local runtime, with real etcd processes.

Prints medians over several runs and writes bench/results/recovery.json:
- survivor path: two of three members SIGKILLed with their data deleted, to a healthy
  3-member cluster rebuilt from the survivor (spec.disasterRecovery Automatic), against a
  fresh 3-member bootstrap by the same supervisor in the same run (the recovery is that
  bootstrap plus one restart of the survivor with --force-new-cluster);
- backup path: every member SIGKILLed with its data deleted, to a healthy 3-member cluster
  restored from the newest verified backup, against a new cluster restored from the same
  backup with spec.restore in the same run.
Both with 2,000 keys written before the loss. Figures depend on the machine and its load (a
2-core machine shared with other work gives noisy seconds): compare the ratios.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import sys
import tempfile
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.cluster_context import Timing
from actors.model import (
    BackupSpec,
    ClusterRef,
    ClusterResource,
    ClusterSpec,
    DisasterRecoverySpec,
    LocalStore,
    RecoveryMode,
    RestoreSpec,
    StoreSpec,
)
from bench.report import median_line, write_result
from supervisor.etcd.client import open_etcd_client
from supervisor.local.backups import local_backups, local_store_opener
from supervisor.local.embedded import LocalSupervisor, is_healthy, open_local_supervisor
from tests.harness.clock import fast_clock  # cron minutes in two real seconds

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
KEYS = 2_000
DAEMON_TIMING = Timing()  # what `etcd-supervisor local` uses
AUTOMATIC = DisasterRecoverySpec(RecoveryMode.AUTOMATIC)


def cluster(name: str, **spec: object) -> ClusterResource:
    return ClusterResource(ClusterRef("default", name), ClusterSpec(size=3, tls_enabled=False, **spec))  # type: ignore[arg-type]


async def write_keys(urls: list[str]) -> None:
    async with open_etcd_client(urls) as etcd:
        for i in range(KEYS):
            await etcd.put(f"bench/{i:06d}".encode(), os.urandom(64).hex().encode())


def lose(sup: LocalSupervisor, ref: ClusterRef, names_pids: list[tuple[str, int | None]]) -> None:
    for name, pid in names_pids:
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        shutil.rmtree(sup.runtime.member_dir(ref, name) / "data")


async def timed_healthy(sup: LocalSupervisor, ref: ClusterRef, gone: set[str], start: float) -> float:
    with trio.fail_after(180):
        await sup.wait_for(ref, lambda s: is_healthy(s, 3) and not gone & {m.id for m in s.members})
    return trio.current_time() - start


async def survivor_run(workdir: Path) -> dict[str, float]:
    async with open_local_supervisor(workdir, timing=DAEMON_TIMING) as sup:
        demo = cluster("demo", disaster_recovery=AUTOMATIC)
        start = trio.current_time()
        await sup.fleet.apply([demo])
        with trio.fail_after(120):
            status = await sup.wait_healthy(demo.ref, 3)
        bootstrap = trio.current_time() - start
        await write_keys([m.client_url for m in status.members])
        keep = next(m for m in status.members if m.role.value == "follower")
        lost = [m for m in status.members if m is not keep]
        start = trio.current_time()
        lose(sup, demo.ref, [(m.name, m.pid) for m in lost])
        recovery = await timed_healthy(sup, demo.ref, {m.id for m in lost}, start)
    return {"bootstrap_s": bootstrap, "survivor_recovery_s": recovery}


async def backup_run(workdir: Path) -> dict[str, float]:
    store = StoreSpec(local=LocalStore(str(workdir / "backups")))

    def children(runtime):  # type: ignore[no-untyped-def]
        return [
            local_backups(runtime, manifest_dir=workdir, scratch_dir=workdir / "scratch", clock=fast_clock())
        ]

    stores = local_store_opener(workdir, {})
    async with open_local_supervisor(
        workdir / "state", timing=DAEMON_TIMING, children=children, stores=stores
    ) as sup:
        demo = cluster(
            "demo", disaster_recovery=AUTOMATIC, backup=BackupSpec(schedule="* * * * *", store=store)
        )
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        await write_keys([m.client_url for m in status.members])
        head = 0
        async with open_etcd_client([m.client_url for m in status.members]) as etcd:
            head = await etcd.current_revision()
        with trio.fail_after(120):
            status = await sup.wait_for(demo.ref, lambda s: _verified_at(s) >= head)
        key = status.backup.last_successful_backup.key  # type: ignore[union-attr]

        # The reference: a new cluster restored from the same backup with spec.restore.
        copy = cluster("copy", restore=RestoreSpec(store=store, key=key))
        start = trio.current_time()
        await sup.fleet.apply([demo, copy])
        restore = await timed_healthy(sup, copy.ref, set(), start)

        members = sup.recorder.statuses[demo.ref].members
        start = trio.current_time()
        lose(sup, demo.ref, [(m.name, m.pid) for m in members])
        recovery = await timed_healthy(sup, demo.ref, {m.id for m in members}, start)
    return {"restore_new_cluster_s": restore, "backup_recovery_s": recovery}


def _verified_at(status) -> int:  # type: ignore[no-untyped-def]
    last = status.backup.last_successful_backup if status.backup else None
    return last.revision if last is not None and last.verified else 0


def main() -> None:
    runs: dict[str, list[float]] = {}
    for _ in range(RUNS):
        for run in (survivor_run, backup_run):
            with tempfile.TemporaryDirectory() as workdir:
                for key, value in trio.run(run, Path(workdir)).items():
                    runs.setdefault(key, []).append(value)
    medians = {key: statistics.median(values) for key, values in runs.items()}
    result = {
        "runs": RUNS,
        "keys": KEYS,
        "samples": runs,
        "medians": medians,
        "survivor_recovery_over_bootstrap": medians["survivor_recovery_s"] / medians["bootstrap_s"],
        "backup_recovery_over_restore": medians["backup_recovery_s"] / medians["restore_new_cluster_s"],
    }

    def line(label: str, key: str, note: str = "") -> str:
        return median_line(label, runs[key], note, width=38)

    print(f"recovery, median [range] of {RUNS} runs (machine: {os.cpu_count()} cores, shared and noisy)")
    print(line("3-member bootstrap (reference)", "bootstrap_s"))
    ratio = result["survivor_recovery_over_bootstrap"]
    print(line("majority lost -> healthy (survivor)", "survivor_recovery_s", f"{ratio:.2f}x the bootstrap"))
    print(line("new cluster from backup (reference)", "restore_new_cluster_s"))
    ratio = result["backup_recovery_over_restore"]
    print(line("all lost -> healthy (backup)", "backup_recovery_s", f"{ratio:.2f}x the restore"))
    write_result("recovery", result)


if __name__ == "__main__":
    main()

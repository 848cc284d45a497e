"""Restore to a revision: time to a healthy restored seed as a function of the deltas replayed.

One source cluster (local runtime, real etcd) takes a verified full backup, then delta backups
follow 2 x 10,000 writes. New one-member clusters are restored to the snapshot's own revision
(nothing to replay: the reference, measured in the same run), to 10,000 revisions after it and
to 20,000; the medians over BENCH_RUNS restores each give the seconds per 10,000 deltas
replayed. Writes bench/results/restore_revision.json. A 2-core machine shared with other work
gives noisy seconds: compare the differences and the ratio, not the absolute figures.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

import attrs
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.backup.deltas import covered_to, deltas_prefix, parse_chunk_key
from actors.cluster_context import Timing
from actors.model import (
    BackupSpec,
    ClusterRef,
    ClusterResource,
    ClusterSpec,
    LocalStore,
    RestoreSpec,
    StoreSpec,
)
from bench.report import write_result
from supervisor.etcd.client import open_etcd_client
from supervisor.local.backups import local_backups, local_store_opener
from supervisor.local.deltas import local_deltas
from supervisor.local.embedded import open_local_supervisor
from tests.harness.clock import fast_clock  # cron minutes in two real seconds

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
STEP = 10_000  # writes between the restore points


def cluster(name: str, **spec: object) -> ClusterResource:
    return ClusterResource(ClusterRef("default", name), ClusterSpec(size=1, tls_enabled=False, **spec))  # type: ignore[arg-type]


async def run(workdir: Path) -> dict[str, object]:
    store = StoreSpec(local=LocalStore(str(workdir / "backups")))

    def children(runtime):  # type: ignore[no-untyped-def]
        scratch, clock = workdir / "scratch", fast_clock()
        return [
            local_backups(runtime, manifest_dir=workdir, scratch_dir=scratch, clock=clock, wake_every=0.5),
            local_deltas(runtime, manifest_dir=workdir, scratch_dir=scratch, clock=clock),
        ]

    stores = local_store_opener(workdir, {})
    async with open_local_supervisor(
        workdir / "state", timing=Timing(), children=children, stores=stores
    ) as sup:
        backup = BackupSpec(schedule="* * * * *", store=store, delta_period="1s")
        source = cluster("source", backup=backup)
        await sup.fleet.apply([source])
        with trio.fail_after(120):
            status = await sup.wait_for(source.ref, _verified)
        snapshot = status.backup.last_successful_backup  # type: ignore[union-attr]
        # No further full backups: every restore point after the snapshot needs the deltas.
        deltas_only = attrs.evolve(
            source, spec=attrs.evolve(source.spec, backup=attrs.evolve(backup, schedule=None)), generation=2
        )
        await sup.fleet.apply([deltas_only])
        async with open_etcd_client([m.client_url for m in status.members]) as etcd:
            for i in range(2 * STEP):
                await etcd.put(b"bench/%06d" % (i % 5000), os.urandom(32).hex().encode())
            head = await etcd.current_revision()
        with trio.fail_after(120):
            while True:  # the deltas reach the last write
                if covered_to(_chunks(workdir / "backups", source.ref), snapshot.revision) >= head:
                    break
                await trio.sleep(0.2)
        targets = {0: snapshot.revision, STEP: head - STEP, 2 * STEP: head}
        seconds: dict[int, list[float]] = {n: [] for n in targets}
        restored = []
        for attempt in range(RUNS):
            for replayed, revision in targets.items():
                copy = cluster(
                    f"at-{replayed}-{attempt}",
                    restore=RestoreSpec(store=store, key=snapshot.key, revision=revision),
                )
                restored.append(copy)
                start = trio.current_time()
                await sup.fleet.apply([deltas_only, *restored])
                with trio.fail_after(600):
                    await sup.wait_healthy(copy.ref, 1)
                seconds[replayed].append(trio.current_time() - start)
    return {"snapshot_revision": snapshot.revision, "head": head, "seconds": seconds}


def _verified(status) -> bool:  # type: ignore[no-untyped-def]
    last = status.backup.last_successful_backup if status.backup else None
    return last is not None and last.verified


def _chunks(directory: Path, ref: ClusterRef):  # type: ignore[no-untyped-def]
    root = directory / deltas_prefix(ref)
    return [c for p in root.glob("*.jsonl") if (c := parse_chunk_key(str(p.relative_to(directory))))]


def main() -> None:
    with tempfile.TemporaryDirectory() as workdir:
        found = trio.run(run, Path(workdir))
    seconds: dict[int, list[float]] = found["seconds"]  # type: ignore[assignment]
    medians = {n: statistics.median(v) for n, v in seconds.items()}
    per_step = (medians[2 * STEP] - medians[0]) / 2
    result = {
        "runs": RUNS,
        "samples_s": {str(n): v for n, v in seconds.items()},
        "medians_s": {str(n): m for n, m in medians.items()},
        "seconds_per_10000_deltas": per_step,
        "twenty_over_ten_thousand_extra": (medians[2 * STEP] - medians[0])
        / max(medians[STEP] - medians[0], 1e-9),
        "restore_with_20000_over_snapshot_only": medians[2 * STEP] / medians[0],
    }
    print(
        f"restore to a revision, median of {RUNS} restores"
        f" (machine: {os.cpu_count()} cores, shared and noisy)"
    )
    for n, m in medians.items():
        spread = f"[{min(seconds[n]):.2f}..{max(seconds[n]):.2f}]"
        print(f"  {n:>6} deltas replayed -> healthy seed  {m:6.2f} s  {spread}")
    print(
        f"  per 10,000 deltas replayed: {per_step:.2f} s (linear: the 20,000 extra is"
        f" {result['twenty_over_ten_thousand_extra']:.2f}x the 10,000 extra)"
    )
    write_result("restore_revision", result)


if __name__ == "__main__":
    main()

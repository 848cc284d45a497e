"""Adoption (spec.adopt) timings on the local runtime, with real etcd processes: a 3-member
cluster started by hand and holding BENCH_ADOPT_MIB (256) MiB of data is taken over live, under
a client workload, and its old members removed (removeOld).

Per run prints, and writes bench/results/adoption.json with the medians over the runs:
- the adoption's total time: the EtcdCluster applied to the time only its own three members are
  members, every one healthy;
- the longest client-visible gap during it (between two successful operations of a put/get
  workload whose endpoints follow the membership as the status shows it), against the longest
  gap of one leadership move on the old cluster under the same workload, same run (the target:
  no gap longer than one leadership move).
Figures depend on the machine and its load (2 shared cores here): compare the ratio.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.cluster_context import Timing
from actors.model import AdoptSpec, ClusterRef, ClusterResource, ClusterSpec, ClusterStatus
from bench.report import median_line, run_in_fresh_dirs, write_result
from supervisor.etcd.admin import EtcdAdminAdapter
from supervisor.etcd.client import open_etcd_client
from supervisor.local.embedded import LocalSupervisor, is_healthy, open_local_supervisor
from tests.harness.adoption import new_voters
from tests.harness.etcd import EtcdCluster, running_cluster
from tests.harness.etcd_versions import built_or_skip
from tests.harness.history import KvWorkload

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
DATA_MIB = int(os.environ.get("BENCH_ADOPT_MIB", "256"))
REF = ClusterRef("default", "demo")
VERSION = ClusterSpec().version


def longest_gap(workload: KvWorkload, start: float, end: float) -> float:
    """Seconds (monotonic) without a successful operation between start and end."""
    ok = sorted(op.returned / 1e9 for op in workload.history.operations if op.outcome == "ok")
    times = [start, *(t for t in ok if start <= t <= end), end]
    return max(b - a for a, b in itertools.pairwise(times))


async def fill(urls: list[str], mib: int) -> None:
    value = os.urandom(1024 * 1024)  # incompressible, as etcd keeps it
    async with open_etcd_client(urls, call_timeout=30.0) as etcd:
        for n in range(mib):
            await etcd.put(f"bulk/{n:05d}".encode(), value)


async def move_leader_gap(old: EtcdCluster, workload: KvWorkload) -> float:
    """The longest gap around one leadership move on the old cluster (the reference)."""
    admin = EtcdAdminAdapter(tls=None, call_timeout=10.0)
    try:
        members = await admin.member_list(old.endpoints)
        leader = (await admin.member_health(old.endpoints[0])).leader_id
        target = next(m.id for m in members if m.id != leader)
        await trio.sleep(2)
        start = time.monotonic()
        await admin.move_leader(old.endpoints, target)
        await trio.sleep(2)
        return longest_gap(workload, start, time.monotonic())
    finally:
        await admin.aclose()


def only_new(status: ClusterStatus) -> bool:
    return is_healthy(status, 3) and all(m.name.startswith("demo-") for m in status.members)


async def follow(sup: LocalSupervisor, workload: KvWorkload, old_urls: list[str]) -> None:
    """The workload's endpoints: the old members, then also the new voters, then only those."""
    while True:
        status = sup.recorder.statuses.get(REF)
        if status is not None:
            voting = new_voters(status)
            workload.endpoints[:] = voting if only_new(status) else [*old_urls, *voting]
        await trio.sleep(0.2)


async def one_run(workdir: Path) -> dict[str, float]:
    with running_cluster(built_or_skip(VERSION), workdir / "old", size=3) as old:
        old_urls = list(old.endpoints)
        async with open_local_supervisor(workdir / "state", timing=Timing()) as sup:
            await fill(old_urls, DATA_MIB)
            workload = KvWorkload(endpoints=list(old_urls), max_operations=10**7)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(workload.run)
                await workload.wait_for_more(50)
                reference = await move_leader_gap(old, workload)
                nursery.start_soon(follow, sup, workload, old_urls)
                spec = ClusterSpec(
                    size=3, tls_enabled=False, adopt=AdoptSpec(tuple(old_urls), remove_old=True)
                )
                start = time.monotonic()
                await sup.fleet.apply([ClusterResource(REF, spec)])
                with trio.fail_after(900):
                    await sup.wait_for(REF, only_new)
                total = time.monotonic() - start
                await workload.wait_for_more(50)
                gap = longest_gap(workload, start, time.monotonic())
                nursery.cancel_scope.cancel()
    return {"adoption_s": total, "adoption_gap_s": gap, "move_leader_gap_s": reference}


def main() -> None:
    built_or_skip(VERSION)
    runs, medians = run_in_fresh_dirs(one_run, RUNS)
    ratio = medians["adoption_gap_s"] / medians["move_leader_gap_s"]
    result = {
        "runs": RUNS,
        "version": VERSION,
        "data_mib": DATA_MIB,
        "samples": runs,
        "medians": medians,
        "adoption_gap_over_move_leader_gap": ratio,
    }
    print(f"adoption of 3 members with {DATA_MIB} MiB, etcd {VERSION}, median [range] of {RUNS} runs")
    print(f"({os.cpu_count()} cores, shared and noisy)")
    print(median_line("adoption, applied to only new members", runs["adoption_s"], width=44))
    print(median_line("longest client gap, one leadership move", runs["move_leader_gap_s"], width=44))
    note = f"{ratio:.2f}x one leadership move's"
    print(median_line("longest client gap during the adoption", runs["adoption_gap_s"], note, width=44))
    write_result("adoption", result)


if __name__ == "__main__":
    main()

"""Rolling upgrade timings on the local runtime, with real etcd processes: 3.6 -> 3.7, the
upgrade a cluster on the default version faces (BENCH_UPGRADE=3.5:3.6 for another pair of minors).

Per run, in one supervisor (the daemon's own timings), prints medians over the runs and writes
bench/results/upgrade.json:
- a 3-member cluster's rolling upgrade: spec.version changed to the time every member is
  healthy on the new version, against 3 x the same for a 1-member cluster (one member's
  restart-to-healthy on the new version through the same machinery), same run;
- the longest client-visible gap (between two successful writes of a steady put workload)
  during the rolling upgrade, against the longest gap when the leader is simply restarted
  (stopped with SIGTERM, during which etcd itself hands leadership over, and started again) and
  when it is killed (SIGKILL: the others elect a leader after the election timeout), same run.
Figures depend on the machine and its load (a 2-core machine shared with other work gives noisy
seconds): compare the ratios.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.cluster_context import Timing
from actors.model import ClusterRef, ClusterResource, ClusterSpec, ClusterStatus, MemberLaunch
from bench.report import median_line, run_in_fresh_dirs, write_result
from supervisor.etcd.client import open_etcd_client
from supervisor.local.embedded import LocalSupervisor, is_healthy, open_local_supervisor
from tests.harness.etcd_versions import built_or_skip, pinned

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
WRITERS = 4
DAEMON_TIMING = Timing()  # what `etcd-supervisor local` uses
OLD, NEW = (pinned(minor) for minor in os.environ.get("BENCH_UPGRADE", "3.6:3.7").split(":"))


def cluster(name: str, size: int, version: str) -> ClusterResource:
    return ClusterResource(
        ClusterRef("default", name), ClusterSpec(size=size, version=version, tls_enabled=False)
    )


def on(version: str, size: int):  # type: ignore[no-untyped-def]
    def check(status: ClusterStatus) -> bool:
        return is_healthy(status, size) and all(m.version == version for m in status.members)

    return check


class Writes:
    """A steady put workload; `longest_gap` is the longest time without a successful write."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.successes: list[float] = []

    async def run(self) -> None:
        async with open_etcd_client(self.urls, call_timeout=1.0) as etcd, trio.open_nursery() as nursery:
            for writer in range(WRITERS):
                nursery.start_soon(self._writer, etcd, writer)

    async def _writer(self, etcd, writer: int) -> None:  # type: ignore[no-untyped-def]
        n = 0
        while True:
            n += 1
            try:
                await etcd.put(f"bench/{writer}".encode(), str(n).encode())
                self.successes.append(trio.current_time())
            except Exception:
                await trio.sleep(0.01)
            await trio.sleep(0.005)

    def longest_gap(self, start: float, end: float) -> float:
        times = [start, *sorted(t for t in self.successes if start <= t <= end), end]
        return max(b - a for a, b in itertools.pairwise(times))


async def timed(
    sup: LocalSupervisor, docs: dict[ClusterRef, ClusterResource], resource: ClusterResource
) -> float:
    """Seconds from applying `resource` (with the other documents) to it running its version."""
    docs[resource.ref] = resource  # the fleet takes every cluster's document at once
    start = trio.current_time()
    await sup.fleet.apply(list(docs.values()))
    with trio.fail_after(300):
        await sup.wait_for(resource.ref, on(resource.spec.version, resource.spec.size))
    return trio.current_time() - start


async def restart_leader(sup: LocalSupervisor, ref: ClusterRef, spec: ClusterSpec, *, kill: bool) -> None:
    """Stop the leader (SIGTERM: etcd hands leadership over as it stops; or SIGKILL: the others
    elect after the election timeout) and start it again; returns once it is healthy."""
    status = sup.recorder.statuses[ref]
    leader = next(m for m in status.members if m.role.value == "leader")
    runtime = sup.runtime
    if kill:
        assert leader.pid is not None
        os.kill(leader.pid, signal.SIGKILL)  # the cluster actor restarts it from its data
    else:
        urls = next(r.urls for r in await runtime.list_members(ref) if r.name == leader.name)
        await runtime.stop_member(ref, leader.name)
        await runtime.start_member(MemberLaunch(ref, leader.name, urls, (), "existing", spec))

    def back(s: ClusterStatus) -> bool:
        again = next((m for m in s.members if m.name == leader.name), None)
        return is_healthy(s, 3) and again is not None and again.pid != leader.pid

    with trio.fail_after(120):
        await sup.wait_for(ref, back)


async def one_run(workdir: Path) -> dict[str, float]:
    async with open_local_supervisor(workdir, timing=DAEMON_TIMING) as sup:
        demo, one = cluster("demo", 3, OLD), cluster("one", 1, OLD)
        docs = {demo.ref: demo, one.ref: one}
        await timed(sup, docs, demo)
        await timed(sup, docs, one)
        status = sup.recorder.statuses[demo.ref]
        writes = Writes([m.client_url for m in status.members])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writes.run)
            gaps = {}
            for kill in (False, True):
                await trio.sleep(2)  # steady state first
                start = trio.current_time()
                await restart_leader(sup, demo.ref, demo.spec, kill=kill)
                await trio.sleep(1)
                gaps[kill] = writes.longest_gap(start, trio.current_time())

            one_member = await timed(sup, docs, cluster("one", 1, NEW))
            start = trio.current_time()
            rollout = await timed(sup, docs, cluster("demo", 3, NEW))
            await trio.sleep(1)
            rollout_gap = writes.longest_gap(start, trio.current_time())
            nursery.cancel_scope.cancel()
    return {
        "one_member_restart_s": one_member,
        "rolling_upgrade_s": rollout,
        "leader_restart_gap_s": gaps[False],
        "leader_killed_gap_s": gaps[True],
        "rollout_gap_s": rollout_gap,
    }


def main() -> None:
    built_or_skip(OLD), built_or_skip(NEW)
    runs, medians = run_in_fresh_dirs(one_run, RUNS)
    result = {
        "runs": RUNS,
        "from": OLD,
        "to": NEW,
        "samples": runs,
        "medians": medians,
        "rollout_over_3x_one_member": medians["rolling_upgrade_s"] / (3 * medians["one_member_restart_s"]),
        "rollout_gap_over_leader_restart_gap": medians["rollout_gap_s"] / medians["leader_restart_gap_s"],
        "rollout_gap_over_leader_killed_gap": medians["rollout_gap_s"] / medians["leader_killed_gap_s"],
    }

    def line(label: str, key: str, note: str = "") -> str:
        return median_line(label, runs[key], note, width=46)

    print(f"upgrade {OLD} -> {NEW}, median [range] of {RUNS} runs ({os.cpu_count()} cores, shared and noisy)")
    print(line("one member restarted on the new version", "one_member_restart_s"))
    ratio = result["rollout_over_3x_one_member"]
    print(line("3-member rolling upgrade", "rolling_upgrade_s", f"{ratio:.2f}x 3 x one member"))
    print(line("longest write gap, leader restarted (SIGTERM)", "leader_restart_gap_s"))
    print(line("longest write gap, leader killed (SIGKILL)", "leader_killed_gap_s"))
    ratio = result["rollout_gap_over_leader_restart_gap"]
    ratio_killed = result["rollout_gap_over_leader_killed_gap"]
    note = f"{ratio:.2f}x the restart's, {ratio_killed:.2f}x the kill's"
    print(line("longest write gap during the rollout", "rollout_gap_s", note))
    write_result("upgrade", result)


if __name__ == "__main__":
    main()

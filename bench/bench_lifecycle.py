"""Cluster lifecycle timings on the local runtime, with real etcd processes.

Prints medians over several runs and writes bench/results/lifecycle.json:
- bootstrap: start to a healthy 3-member cluster through the supervisor (seed, then one
  learner at a time), against the floor of three members started at once with a static
  initial cluster, measured in the same run (target: within 2x the floor);
- heal: SIGKILL of a member to healthy again (target: 3 s);
- replace: a member's data directory deleted to a healthy cluster with a new member (target: 10 s).
Figures depend on the machine and its load; compare the ratio, not the seconds.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.cluster_context import Timing
from actors.model import ClusterRef, ClusterResource, ClusterSpec
from bench.report import median_line, write_result
from bench.static_etcd import static_cluster, wait_healthy
from supervisor.local.embedded import is_healthy, open_local_supervisor

# The floor alone spreads from 0.3 s to over 1 s (etcd randomises election timers), so it
# takes a dozen runs for medians to settle.
RUNS = int(os.environ.get("BENCH_RUNS", "11"))
ETCD = Path(sys.executable).parent / "etcd"
ETCDCTL = Path(sys.executable).parent / "etcdctl"
DAEMON_TIMING = Timing()  # what `etcd-supervisor local` uses
# Lost data is noticed on the next health tick, so that delay depends on where in the tick
# the fault lands; faults land at seeded random points of it, not at one lucky phase.
FAULT_PHASE = random.Random(20261121)


async def at_a_random_point_of_a_tick() -> None:
    await trio.sleep(FAULT_PHASE.uniform(0, DAEMON_TIMING.tick))


def static_floor(workdir: Path) -> float:
    """Three members started at once, all knowing each other: the fastest a cluster can form."""
    start = time.monotonic()
    with static_cluster(workdir, 3) as endpoints:
        wait_healthy(endpoints, within=120)
        return time.monotonic() - start


async def supervised_run(workdir: Path) -> dict[str, float]:
    async with open_local_supervisor(workdir, timing=DAEMON_TIMING) as sup:
        demo = ClusterResource(ClusterRef("default", "demo"), ClusterSpec(size=3, tls_enabled=False))
        start = trio.current_time()
        await sup.fleet.apply([demo])
        with trio.fail_after(120):
            status = await sup.wait_healthy(demo.ref, 3)
        bootstrap = trio.current_time() - start

        victim = next(m for m in status.members if m.role.value == "follower")
        await at_a_random_point_of_a_tick()
        start = trio.current_time()
        os.kill(victim.pid, signal.SIGKILL)
        with trio.fail_after(60):
            status = await sup.wait_for(
                demo.ref,
                lambda s: (
                    is_healthy(s, 3) and next(m for m in s.members if m.name == victim.name).pid != victim.pid
                ),
            )
        heal = trio.current_time() - start

        victim = next(m for m in status.members if m.role.value == "follower")
        await at_a_random_point_of_a_tick()
        start = trio.current_time()
        shutil.rmtree(sup.runtime.member_dir(demo.ref, victim.name) / "data")
        with trio.fail_after(120):
            await sup.wait_for(
                demo.ref, lambda s: is_healthy(s, 3) and victim.name not in {m.name for m in s.members}
            )
        replace = trio.current_time() - start
    return {"bootstrap_s": bootstrap, "heal_after_sigkill_s": heal, "replace_lost_data_s": replace}


def main() -> None:
    runs: dict[str, list[float]] = {
        "static_floor_s": [],
        "bootstrap_s": [],
        "heal_after_sigkill_s": [],
        "replace_lost_data_s": [],
    }
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory() as floor_dir:
            runs["static_floor_s"].append(static_floor(Path(floor_dir)))
        with tempfile.TemporaryDirectory() as ours_dir:
            for key, value in trio.run(supervised_run, Path(ours_dir)).items():
                runs[key].append(value)
    medians = {key: statistics.median(values) for key, values in runs.items()}
    result = {
        "runs": RUNS,
        "samples": runs,
        "medians": medians,
        "bootstrap_over_floor": medians["bootstrap_s"] / medians["static_floor_s"],
        "targets": {"bootstrap_over_floor": 2.0, "heal_after_sigkill_s": 3.0, "replace_lost_data_s": 10.0},
    }

    def line(label: str, key: str, note: str) -> str:
        return median_line(label, runs[key], note, width=26)

    ratio = result["bootstrap_over_floor"]
    print(f"lifecycle, median [range] of {RUNS} runs (machine: {os.cpu_count()} cores, shared and noisy)")
    print(line("static 3-member floor", "static_floor_s", ""))
    print(line("supervised bootstrap", "bootstrap_s", f"{ratio:.2f}x the floor; target <= 2x"))
    print(line("SIGKILL -> healthy", "heal_after_sigkill_s", "target 3 s"))
    print(line("data lost -> replaced", "replace_lost_data_s", "target 10 s"))
    write_result("lifecycle", result)


if __name__ == "__main__":
    main()

"""The supervisor's own cost: many clusters in one daemon, with ports that answer at once.

1,000 clusters x 3 members (BENCH_CLUSTERS to change) run through the real fleet, cluster and
member actors and planners, on in-memory stand-ins for the member runtime and the etcd admin,
so what is measured is the daemon itself, not etcd. After every cluster has formed, a steady
window (BENCH_SECONDS, default 30) measures:

- tick lateness: how much later than one tick after the previous one each cluster's observation
  comes (p50/p99; 0 means ticks come exactly on time);
- scheduler lateness: how late a 10 ms sleeper wakes (p50/p99), the loop's own responsiveness;
- CPU share of one core and resident memory;
- calls per tick per cluster: runtime listings, etcd member lists, probes.

Targets (issue 9): p99 tick lateness < 100 ms, RSS < 300 MB. Prints and writes
bench/results/fleet.json. Machines here are shared: read the figures as this run's, not a law.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path

import attrs
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.cluster_context import Timing
from actors.fleet import open_fleet
from actors.model import (
    ClusterRef,
    ClusterResource,
    ClusterSpec,
    EtcdMember,
    MemberConfig,
    MemberHealth,
    MemberUrls,
    ProcessState,
    RuntimeMember,
)
from actors.ports import ClusterPorts
from supervisor.gc_policy import tune_for_many_actors

CLUSTERS = int(os.environ.get("BENCH_CLUSTERS", "1000"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "30"))
SIZE = 3
TIMING = Timing()  # what the daemon runs with: a 1 s tick
RESULTS = Path(__file__).resolve().parent / "results"


@attrs.define
class Counters:
    calls: collections.Counter[str] = attrs.field(factory=collections.Counter)
    # Per cluster, when its runtime was last listed (once per tick in steady state).
    last_listing: dict[ClusterRef, float] = attrs.field(factory=dict)
    tick_lateness: list[float] = attrs.field(factory=list)
    measuring: bool = False
    formed: int = 0
    all_formed: trio.Event = attrs.field(factory=trio.Event)


@attrs.define
class InstantCluster:
    """One cluster's members and etcd membership in memory: every call answers at once."""

    ref: ClusterRef
    counters: Counters
    runtime: dict[str, RuntimeMember] = attrs.field(factory=dict)
    etcd: dict[int, EtcdMember] = attrs.field(factory=dict)

    # MemberRuntime
    async def list_members(self, cluster: ClusterRef) -> list[RuntimeMember]:
        now = trio.current_time()
        previous = self.counters.last_listing.get(cluster)
        self.counters.last_listing[cluster] = now
        if self.counters.measuring:
            self.counters.calls["list_members"] += 1
            if previous is not None:
                self.counters.tick_lateness.append(max(0.0, now - previous - TIMING.tick))
        return list(self.runtime.values())

    async def allocate_member(self, cluster: ClusterRef, name: str, spec: ClusterSpec) -> MemberUrls:
        urls = MemberUrls(f"peer://{cluster}/{name}", f"client://{cluster}/{name}")
        self.runtime[name] = RuntimeMember(name, urls, ProcessState.ABSENT, False)
        return urls

    async def start_member(self, launch) -> None:  # type: ignore[no-untyped-def]
        self.runtime[launch.name] = RuntimeMember(launch.name, launch.urls, ProcessState.RUNNING, True)
        if launch.initial_cluster_state == "new":
            self.etcd[1] = EtcdMember(
                1, launch.name, (launch.urls.peer_url,), (launch.urls.client_url,), False
            )
        for m in list(self.etcd.values()):
            if m.peer_urls == (launch.urls.peer_url,):
                self.etcd[m.id] = attrs.evolve(m, name=launch.name, client_urls=(launch.urls.client_url,))

    async def stop_member(self, cluster: ClusterRef, name: str) -> None:
        pass

    async def delete_member(self, cluster: ClusterRef, name: str) -> None:
        self.runtime.pop(name, None)

    async def delete_cluster(self, cluster: ClusterRef, *, keep_data: bool) -> None:
        self.runtime.clear()

    def member_config(self, spec: ClusterSpec) -> MemberConfig:
        return MemberConfig("")  # what every member here records: nothing ever rolls

    def watch_members(self, cluster, on_change):  # type: ignore[no-untyped-def]
        return lambda: None

    # EtcdAdmin
    async def member_list(self, endpoints) -> list[EtcdMember]:  # type: ignore[no-untyped-def]
        self._count("member_list")
        return list(self.etcd.values())

    async def add_learner(self, endpoints, peer_url: str) -> EtcdMember:  # type: ignore[no-untyped-def]
        self._count("add_learner")
        member = EtcdMember(len(self.etcd) + 1, "", (peer_url,), (), True)
        self.etcd[member.id] = member
        return member

    async def promote(self, endpoints, member_id: int) -> None:  # type: ignore[no-untyped-def]
        self._count("promote")
        self.etcd[member_id] = attrs.evolve(self.etcd[member_id], is_learner=False)
        if len(self.etcd) == SIZE and not any(m.is_learner for m in self.etcd.values()):
            self.counters.formed += 1
            if self.counters.formed == CLUSTERS:
                self.counters.all_formed.set()

    async def remove(self, endpoints, member_id: int) -> None:  # type: ignore[no-untyped-def]
        self.etcd.pop(member_id, None)

    async def move_leader(self, endpoints, target_id: int) -> None:  # type: ignore[no-untyped-def]
        pass

    async def member_health(self, client_url: str) -> MemberHealth:
        self._count("member_health")
        me = next(m for m in self.etcd.values() if client_url in m.client_urls)
        return MemberHealth(me.id, 1, 10, 10, me.is_learner, 1)

    async def aclose(self) -> None:
        pass

    # StatusSink / EventSink
    async def publish(self, cluster, status) -> None:  # type: ignore[no-untyped-def]
        self._count("status_writes")

    async def record(  # type: ignore[no-untyped-def]
        self, cluster, *, reason, message, warning=False, measured=None
    ) -> None:
        pass

    def _count(self, call: str) -> None:
        if self.counters.measuring:
            self.counters.calls[call] += 1


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def sleeper_lateness(out: list[float]) -> None:
    while True:
        before = trio.current_time()
        await trio.sleep(0.01)
        out.append(trio.current_time() - before - 0.01)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def run() -> dict[str, object]:
    counters = Counters()
    clusters = {ClusterRef("bench", f"c{i:04d}"): InstantCluster(ClusterRef("bench", f"c{i:04d}"), counters)
                for i in range(CLUSTERS)}  # fmt: skip

    def ports_for(res: ClusterResource) -> ClusterPorts:
        c = clusters[res.ref]
        return ClusterPorts(c, c, c, c)

    rss_before = rss_mib()
    started = time.monotonic()
    async with open_fleet(ports_for, timing=TIMING, name="bench") as fleet:
        spec = ClusterSpec(size=SIZE, tls_enabled=False)
        await fleet.apply([ClusterResource(ref, spec) for ref in clusters])
        await counters.all_formed.wait()
        formed_s = time.monotonic() - started
        await trio.sleep(3 * TIMING.tick)  # let the last clusters settle into plain ticks
        sleeps: list[float] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleeper_lateness, sleeps)
            counters.measuring = True
            cpu0, wall0 = cpu_seconds(), time.monotonic()
            await trio.sleep(SECONDS)
            cpu1, wall1 = cpu_seconds(), time.monotonic()
            counters.measuring = False
            nursery.cancel_scope.cancel()
        rss = rss_mib()
    ticks = SECONDS / TIMING.tick
    per_tick = {k: round(v / ticks / CLUSTERS, 3) for k, v in sorted(counters.calls.items())}
    return {
        "clusters": CLUSTERS,
        "members_per_cluster": SIZE,
        "steady_seconds": SECONDS,
        "formed_all_s": round(formed_s, 1),
        "tick_lateness_p50_ms": round(1000 * percentile(counters.tick_lateness, 0.50), 1),
        "tick_lateness_p99_ms": round(1000 * percentile(counters.tick_lateness, 0.99), 1),
        "scheduler_lateness_p50_ms": round(1000 * percentile(sleeps, 0.50), 2),
        "scheduler_lateness_p99_ms": round(1000 * percentile(sleeps, 0.99), 2),
        "cpu_share_of_one_core": round((cpu1 - cpu0) / (wall1 - wall0), 3),
        "rss_mib": round(rss, 1),
        "rss_mib_before_clusters": round(rss_before, 1),
        "calls_per_tick_per_cluster": per_tick,
        "etcd_calls_per_tick_per_cluster": round(
            sum(v for k, v in per_tick.items() if k in ("member_list", "member_health")), 3
        ),
    }


def main() -> None:
    tune_for_many_actors()  # as `etcd-supervisor` does at start
    report = trio.run(run)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fleet.json").write_text(json.dumps(report, indent=2) + "\n")
    for key, value in report.items():
        print(f"{key:34} {value}")
    late = report["tick_lateness_p99_ms"]
    print(f"p99 tick lateness {late} ms (target < 100), RSS {report['rss_mib']} MiB (target < 300)")


if __name__ == "__main__":
    main()

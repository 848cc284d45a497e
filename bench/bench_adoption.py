"""Adoption (spec.adopt) timings on the local runtime, with real etcd processes: a 3-member
cluster started by hand and holding BENCH_ADOPT_MIB (256) MiB of data is taken over live, under
a client workload, and its old members removed (removeOld).

Per run prints, and writes bench/results/adoption.json with the medians over the runs:
- the adoption's total time: the EtcdCluster applied to the time only its own three members are
  members, every one healthy;
- the longest client-visible gap during it (between two successful operations of a put/get
  workload whose endpoints follow the voting members the status lists), and apart: while the
  new members join (the leader sends each the whole database as a snapshot: the longest, and
  the median of the three joins' longest) and while the old members leave (leadership moved
  off them, removals);
- references on the old cluster under the same workload, same run: the longest gap of one
  leadership move (the issue's target: no gap longer than one leadership move), and of one
  member joining it by hand as a learner (member add --learner, then its process): what etcd
  itself costs here to send the data to a new member, its data on the disk every etcd process
  of the bench shares, then on tmpfs (a disk of its own, as a production member has);
- where the longest gap fell, and the longest while the old members left: the supervisor's
  Events around it, the clients' endpoints then, whether the clients' or the supervisor's event
  loop stalled in it, and etcd's warnings logged in it.

The clients run in a process of their own at a higher priority (nice -10): a gap is then the
cluster's, not the clients' turn on the two shared cores, nor a pause of the supervisor's event
loop. Each measured step starts after a sync and 2 s of quiet. Figures depend on the machine
and its load (2 shared cores and one disk here): compare the ratios.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import attrs
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.cluster_context import Timing
from actors.errors import EtcdError
from actors.model import AdoptSpec, ClusterRef, ClusterResource, ClusterSpec, ClusterStatus, Role
from bench.report import median_line, run_in_fresh_dirs, write_result
from supervisor.aio import open_asyncio_loop
from supervisor.etcd.admin import EtcdAdminAdapter
from supervisor.etcd.client import open_etcd_client
from supervisor.local.embedded import LocalSupervisor, is_healthy, open_local_supervisor
from tests.harness.etcd import EtcdCluster, running_cluster
from tests.harness.etcd_versions import built_or_skip
from tests.harness.history import KvWorkload
from tests.harness.poll import eventually

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
DATA_MIB = int(os.environ.get("BENCH_ADOPT_MIB", "256"))
REF = ClusterRef("default", "demo")
VERSION = ClusterSpec().version
WALL = time.time() - time.monotonic()  # monotonic -> unix seconds, to read etcd's log times


@attrs.frozen
class Op:
    """One operation of the clients, as their process hands it back (monotonic seconds: the
    clock is the machine's, the same in both processes)."""

    called: float
    returned: float
    ok: bool
    error: str


def gap_window(ops: list[Op], start: float, end: float) -> tuple[float, float]:
    """The longest span without a successful operation between start and end."""
    ok = sorted(op.returned for op in ops if op.ok)
    times = [start, *(t for t in ok if start <= t <= end), end]
    return max(itertools.pairwise(times), key=lambda pair: pair[1] - pair[0])


def longest_gap(ops: list[Op], start: float, end: float) -> float:
    a, b = gap_window(ops, start, end)
    return b - a


def late_for(lags: list[tuple[float, float]], a: float, b: float) -> float:
    """How long a loop that woke late at these (time, lateness) was stalled between a and b."""
    overlaps = (min(woke, b) - max(woke - late, a) for woke, late in lags)
    return sum(overlap for overlap in overlaps if overlap > 0)


async def watch_loop(lags: list[tuple[float, float]]) -> None:
    """Notes when this event loop wakes late (every client's answer waits as long)."""
    while True:
        before = time.monotonic()
        await trio.sleep(0.005)
        late = time.monotonic() - before - 0.005
        if late > 0.02:
            lags.append((time.monotonic(), late))


# ---- the clients, in a process of their own: a client of an etcd cluster shares neither the
# supervisor's event loop nor its interpreter, whose pauses would otherwise read as gaps; and
# at a higher priority (as root), so that their turn on the two shared cores does not either


async def run_clients(endpoints_file: Path, history_file: Path) -> None:
    """This file run with --clients: the put/get workload on the endpoints the file names (read
    again every 0.1 s), the count of successful operations printed as it grows, until stdin
    closes; then every operation, and when this process's loop woke late, into history_file."""
    with contextlib.suppress(PermissionError):  # not root: the same priority as the rest
        os.nice(-10)
    lags: list[tuple[float, float]] = []
    urls = json.loads(await trio.Path(endpoints_file).read_text())
    async with open_asyncio_loop(), trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin:
        workload = KvWorkload(endpoints=urls, max_operations=10**7)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            nursery.start_soon(watch_loop, lags)
            nursery.start_soon(_reread_endpoints, trio.Path(endpoints_file), workload)
            nursery.start_soon(_print_progress, workload)
            while await stdin.receive_some():  # b"" once the bench closed it
                pass
            nursery.cancel_scope.cancel()
    ops = [
        [op.call / 1e9, op.returned / 1e9, op.outcome == "ok", op.error or ""]
        for op in workload.history.operations
    ]
    await trio.Path(history_file).write_text(json.dumps({"operations": ops, "lags": lags}))


async def _reread_endpoints(endpoints_file: trio.Path, workload: KvWorkload) -> None:
    while True:
        await trio.sleep(0.1)
        urls = json.loads(await endpoints_file.read_text())
        if urls != workload.endpoints:
            workload.endpoints[:] = urls


async def _print_progress(workload: KvWorkload) -> None:
    while True:
        await trio.sleep(0.05)
        print(workload.acknowledged, flush=True)


@attrs.define
class Clients:
    """The bench's side of the clients' process: their endpoints, their progress, their history."""

    process: trio.Process
    directory: Path
    endpoints: list[str]
    acknowledged: int = 0
    changes: list[tuple[float, list[str]]] = attrs.field(factory=list)  # (when, endpoints)
    _progress: trio.Event = attrs.field(factory=trio.Event)

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, directory: Path, endpoints: list[str]) -> AsyncIterator[Clients]:
        await trio.Path(directory).mkdir(parents=True, exist_ok=True)
        await trio.Path(directory / "endpoints.json").write_text(json.dumps(endpoints))
        command = [sys.executable, __file__, "--clients", str(directory / "endpoints.json")]
        process = await trio.lowlevel.open_process(
            [*command, str(directory / "history.json")], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        clients = cls(process, directory, list(endpoints))
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(clients._read_progress)
                yield clients
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await clients._stop()

    async def _read_progress(self) -> None:
        assert self.process.stdout is not None
        buffered = b""
        async for chunk in self.process.stdout:
            *lines, buffered = (buffered + chunk).split(b"\n")
            if lines:
                self.acknowledged = int(lines[-1])
                self._progress.set()
                self._progress = trio.Event()

    async def wait_for_more(self, count: int) -> None:
        """Until `count` more operations succeeded: the cluster serves reads and writes."""
        target = self.acknowledged + count
        while self.acknowledged < target:
            await self._progress.wait()

    def set_endpoints(self, urls: list[str]) -> None:
        if urls != self.endpoints:
            tmp = self.directory / "endpoints.tmp"
            tmp.write_text(json.dumps(urls))
            tmp.replace(self.directory / "endpoints.json")  # read whole by the clients, old or new
            self.endpoints = list(urls)
            self.changes.append((time.monotonic(), list(urls)))

    async def _stop(self) -> None:
        if self.process.stdin is not None:
            await self.process.stdin.aclose()
        with trio.move_on_after(30):
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()

    def history(self) -> tuple[list[Op], list[tuple[float, float]]]:
        """Every operation and the clients' loop's late wake-ups (once the process ended)."""
        found = json.loads((self.directory / "history.json").read_text())
        return [Op(*op) for op in found["operations"]], [(woke, late) for woke, late in found["lags"]]


async def fill(urls: list[str], mib: int) -> None:
    value = os.urandom(1024 * 1024)  # incompressible, as etcd keeps it
    async with open_etcd_client(urls, call_timeout=30.0) as etcd:
        for n in range(mib):
            await etcd.put(f"bulk/{n:05d}".encode(), value)


async def settle() -> None:
    """Before each measured step: what the earlier ones wrote is on disk (sync), 2 s pass."""
    await trio.to_thread.run_sync(os.sync)
    await trio.sleep(2)


async def move_leader(old: EtcdCluster) -> tuple[float, float]:
    """One leadership move on the old cluster (the reference): its window, and 2 s after."""
    admin = EtcdAdminAdapter(tls=None, call_timeout=10.0)
    try:
        members = await admin.member_list(old.endpoints)
        leader = (await admin.member_health(old.endpoints[0])).leader_id
        target = next(m.id for m in members if m.id != leader)
        start = time.monotonic()
        await admin.move_leader(old.endpoints, target)
        await trio.sleep(2)
        return start, time.monotonic()
    finally:
        await admin.aclose()


async def join_by_hand(old: EtcdCluster, name: str, directory: Path | None = None) -> tuple[float, float]:
    """One member joins the old cluster by hand as a learner (member add --learner, then its
    process, as tests/harness/etcd.py does): what etcd itself costs here to send the data to a
    new member, its data on the disk the voters use unless `directory` says where. Its window:
    from the add until the learner applied what the leader had then, and 2 s after; then it is
    removed again."""
    admin = EtcdAdminAdapter(tls=None, call_timeout=10.0)
    learner = old.prepare_member(name)
    if directory is not None:
        learner.directory = directory
    voters = list(old.endpoints)
    try:
        start = time.monotonic()
        added = await admin.add_learner(voters, learner.peer_url)
        goal = (await admin.member_health(voters[0])).raft_index
        await trio.to_thread.run_sync(lambda: old.start_joining(learner, wait=False))

        async def caught_up() -> bool:
            return await applied(admin, learner.client_url, goal)

        await eventually(caught_up, lambda done: done, within=300, what="the learner caught up")
        await trio.sleep(2)
        end = time.monotonic()
        await admin.remove(voters, added.id)
        await trio.to_thread.run_sync(old.forget, learner)
        return start, end
    finally:
        await admin.aclose()


@contextlib.contextmanager
def own_disk() -> Iterator[Path]:
    """A directory off the disk every etcd process of the bench shares: in memory (tmpfs)."""
    directory = Path(tempfile.mkdtemp(prefix="bench-adoption-", dir="/dev/shm"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


async def applied(admin: EtcdAdminAdapter, url: str, index: int) -> bool:
    try:
        return (await admin.member_health(url)).raft_applied_index >= index
    except EtcdError:
        return False  # not listening yet, or still restoring the snapshot


@attrs.define
class Timeline:
    """When the supervisor's Events were recorded, and when the supervisor's event loop woke
    late (monotonic seconds): to place a gap among the adoption's steps."""

    events: list[tuple[float, str, str]] = attrs.field(factory=list)
    lags: list[tuple[float, float]] = attrs.field(factory=list)

    async def stamp_events(self, sup: LocalSupervisor) -> None:
        while True:
            for _, reason, message in sup.recorder.events[len(self.events) :]:
                self.events.append((time.monotonic(), reason, message))
            await sup.recorder.changed.wait()

    def times(self, reason: str) -> list[float]:
        return [at for at, r, _ in self.events if r == reason]


def report(timeline: Timeline, clients: Clients, start: float, end: float, logs: Path) -> None:
    """The adoption's steps (its Events), then where its longest gap fell, and the longest
    while the old members left."""
    ops, _ = clients.history()
    print("  the adoption's steps, after the apply:")
    for at, reason, message in timeline.events:
        print(f"    {at - start:+8.3f} s  {reason}: {message[:80]}")
    promoted = max(timeline.times("LearnerPromoted"), default=start)
    place("longest gap", gap_window(ops, start, end), timeline, clients, start, logs)
    place(
        "longest gap while the old members left",
        gap_window(ops, promoted, end),
        timeline,
        clients,
        start,
        logs,
    )


def place(
    what: str, gap: tuple[float, float], timeline: Timeline, clients: Clients, start: float, logs: Path
) -> None:
    """A gap among the steps: the Events around it, the clients' endpoints then, the loops that
    stalled in it, what failed in it and what etcd logged in it."""
    a, b = gap
    ops, client_lags = clients.history()
    near = [f"{reason} {at - start:+.3f} s" for at, reason, _ in timeline.events if a - 0.5 <= at <= b + 0.5]
    print(f"  {what}: {b - a:.3f} s, {a - start:+.3f} s to {b - start:+.3f} s; Events near: {near}")
    then = [urls for at, urls in clients.changes if at <= a]
    print(f"    the clients' endpoints then: {then[-1] if then else 'the old members'}")
    print(
        f"    loops that woke late in it: the clients' for {late_for(client_lags, a, b):.3f} s,"
        f" the supervisor's for {late_for(timeline.lags, a, b):.3f} s"
    )
    failed = [op for op in ops if not op.ok and a < op.returned < b]
    print(f"    operations that failed in it: {len(failed)} {sorted({op.error for op in failed})[:3]}")
    for line in etcd_warnings(logs, a, b):
        print(f"    etcd: {line}")


def etcd_warnings(root: Path, start: float, end: float) -> list[str]:
    """etcd's warnings logged between start and end (monotonic), per member, counted."""
    counts: Counter[str] = Counter()
    for log in root.rglob("etcd.log"):
        for line in log.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
                at = datetime.datetime.fromisoformat(entry["ts"]).timestamp() - WALL
            except (ValueError, KeyError, TypeError):
                continue
            if entry.get("level") == "warn" and start - 0.05 <= at <= end + 0.05:
                counts[f"{log.parent.name}: {entry.get('msg', '')[:80]}"] += 1
    return [f"{line} (x{n})" for line, n in sorted(counts.items())]


def only_new(status: ClusterStatus) -> bool:
    return is_healthy(status, 3) and all(m.name.startswith("demo-") for m in status.members)


def voters(status: ClusterStatus) -> list[str]:
    """Client URLs of the members that vote and answer, old and new, as the status lists them."""
    voting = (Role.LEADER, Role.FOLLOWER)
    return [m.client_url for m in status.members if m.role in voting and m.healthy]


async def follow(sup: LocalSupervisor, clients: Clients) -> None:
    """The clients' endpoints: the members the status lists as voting and answering, old and
    new; an old member leaves them once the status no longer lists it."""
    while True:
        status = sup.recorder.statuses.get(REF)
        if status is not None and voters(status):
            clients.set_endpoints(voters(status))
        await trio.sleep(0.2)


async def one_run(workdir: Path) -> dict[str, float]:
    timeline = Timeline()
    with running_cluster(built_or_skip(VERSION), workdir / "old", size=3) as old:
        old_urls = list(old.endpoints)
        async with open_local_supervisor(workdir / "state", timing=Timing()) as sup:
            await fill(old_urls, DATA_MIB)
            async with (
                Clients.running(workdir / "clients", old_urls) as clients,
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(watch_loop, timeline.lags)
                with trio.fail_after(60):
                    await clients.wait_for_more(50)
                await settle()
                moved = await move_leader(old)
                await settle()
                joined = await join_by_hand(old, "by-hand")
                await settle()
                with own_disk() as directory:  # a disk of its own: tmpfs stands in
                    apart = await join_by_hand(old, "by-hand-apart", directory)
                await settle()
                nursery.start_soon(timeline.stamp_events, sup)
                nursery.start_soon(follow, sup, clients)
                spec = ClusterSpec(
                    size=3, tls_enabled=False, adopt=AdoptSpec(tuple(old_urls), remove_old=True)
                )
                start = time.monotonic()
                await sup.fleet.apply([ClusterResource(REF, spec)])
                with trio.fail_after(900):
                    await sup.wait_for(REF, only_new)
                end = time.monotonic()
                with trio.fail_after(60):
                    await clients.wait_for_more(50)
                nursery.cancel_scope.cancel()
    ops, _ = clients.history()
    window = gap_window(ops, start, end)
    report(timeline, clients, start, end, workdir)
    # One window per new member, each from the previous promotion to its own, then the old
    # members' leaving, from the last promotion on: together the whole adoption.
    promoted = timeline.times("LearnerPromoted")
    joins = [longest_gap(ops, a, b) for a, b in itertools.pairwise([start, *promoted])]
    return {
        "adoption_s": end - start,
        "adoption_gap_s": window[1] - window[0],
        "adoption_join_gap_s": max(joins),
        "adoption_each_join_gap_s": statistics.median(joins),
        "adoption_retire_gap_s": longest_gap(ops, promoted[-1], end),
        "move_leader_gap_s": longest_gap(ops, *moved),
        "learner_join_gap_s": longest_gap(ops, *joined),
        "learner_join_own_disk_gap_s": longest_gap(ops, *apart),
    }


def main() -> None:
    built_or_skip(VERSION)
    runs, medians = run_in_fresh_dirs(one_run, RUNS)

    def ratio(figure: str, reference: str) -> float:
        return medians[figure] / medians[reference]

    result = {
        "runs": RUNS,
        "version": VERSION,
        "data_mib": DATA_MIB,
        "samples": runs,
        "medians": medians,
        "adoption_gap_over_move_leader_gap": ratio("adoption_gap_s", "move_leader_gap_s"),
        "adoption_gap_over_learner_join_gap": ratio("adoption_gap_s", "learner_join_gap_s"),
        "each_join_gap_over_learner_join_gap": ratio("adoption_each_join_gap_s", "learner_join_gap_s"),
        "retire_gap_over_move_leader_gap": ratio("adoption_retire_gap_s", "move_leader_gap_s"),
    }
    print(f"adoption of 3 members with {DATA_MIB} MiB, etcd {VERSION}, median [range] of {RUNS} runs")
    print(f"({os.cpu_count()} cores, shared and noisy; every etcd process on one disk)")
    lines = [
        ("adoption, applied to only new members", "adoption_s", ""),
        ("longest client gap, one leadership move", "move_leader_gap_s", ""),
        ("longest client gap, one learner joins by hand", "learner_join_gap_s", ""),
        (
            "  the same, the learner's data on tmpfs",
            "learner_join_own_disk_gap_s",
            "a disk of its own, as each production member has",
        ),
        (
            "longest client gap during the adoption",
            "adoption_gap_s",
            f"{result['adoption_gap_over_move_leader_gap']:.2f}x one leadership move's,"
            f" {result['adoption_gap_over_learner_join_gap']:.2f}x one learner join's",
        ),
        ("  while the new members join (longest)", "adoption_join_gap_s", ""),
        (
            "  while one new member joins (median of 3)",
            "adoption_each_join_gap_s",
            f"{result['each_join_gap_over_learner_join_gap']:.2f}x one learner join's by hand",
        ),
        (
            "  while the old members leave",
            "adoption_retire_gap_s",
            f"{result['retire_gap_over_move_leader_gap']:.2f}x one leadership move's",
        ),
    ]
    for label, figure, note in lines:
        print(median_line(label, runs[figure], note, width=48))
    write_result("adoption", result)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--clients"]:
        trio.run(run_clients, Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()

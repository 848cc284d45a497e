"""Defragmentation and NOSPACE recovery on real etcd members, driven by the whole supervisor."""

from __future__ import annotations

import re
import time
from pathlib import Path

import attrs
import trio

from actors.maintenance.actor import defrag_child
from actors.measurements import Defragmented
from actors.model import (
    AutoCompactionSpec,
    ClusterResource,
    ClusterStatus,
    CompactionMode,
    DefragSpec,
    MaintenanceSpec,
)
from supervisor.etcd import EtcdError
from supervisor.etcd.client import EtcdClient, open_etcd_client
from supervisor.etcd.errors import NoSpace
from tests.chaos.lifecycle import follow_members, is_healthy, open_local_supervisor, resource, rolled_since
from tests.harness.history import FAILED, UNKNOWN, KvWorkload
from tests.harness.poll import eventually

MiB = 2**20


def with_maintenance(res: ClusterResource, maintenance: MaintenanceSpec, generation: int) -> ClusterResource:
    spec = attrs.evolve(res.spec, maintenance=maintenance)
    return attrs.evolve(res, spec=spec, generation=generation)


def children(runtime):
    return [defrag_child(wake_every=0.3)]


def sizes(status: ClusterStatus) -> dict[str, int]:
    return {m.name: m.db_size or 0 for m in status.members}


def condition(status: ClusterStatus, kind: str):
    return next(c for c in status.conditions if c.type == kind)


async def bloat(client: EtcdClient, *, keys: int, rounds: int, value: bytes) -> None:
    """History the size of keys x rounds x value, of which one round stays live."""
    for r in range(rounds):
        for k in range(keys):
            await client.put(f"/bloat/{k}".encode(), value + bytes([r]))


async def test_fragmented_members_are_defragmented_followers_first_the_leader_last_under_load(tmp_path):
    async with open_local_supervisor(tmp_path, children=children) as sup:
        demo = resource(size=3)
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        urls = [m.client_url for m in status.members]
        async with open_etcd_client(urls, call_timeout=10.0) as client:
            await bloat(client, keys=40, rounds=12, value=b"x" * 64 * 1024)  # ~30 MiB of history
            await client.compact(await client.current_revision())
        defrag = MaintenanceSpec(defrag=DefragSpec(fragmentation_ratio=0.5, min_reclaim="8Mi"))

        # A request that reaches a member while it defragments waits for the defrag (etcd serves
        # nothing there meanwhile): the clients wait it out rather than give up after 2 s (a put
        # given up on is an unknown outcome, which the assertions below count as failed).
        workload = KvWorkload(endpoints=urls, max_operations=100_000, call_timeout=15.0)
        seen_at: list[int] = []  # when each of the recorder's events was first seen
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            nursery.start_soon(stamp_events, sup.recorder, seen_at)
            await workload.wait_for_more(50)
            # Every member's probe must show the fragmentation before defrag is switched on, so one
            # round covers all three (bbolt counts the compacted pages in use until a later write
            # commits, and each member's probe catches up on its own tick): otherwise a round may
            # start with the leader alone and a second round move leadership again.
            bloated = await sup.wait_for(
                demo.ref, lambda s: all(_fragmented(m, defrag.defrag) for m in s.members), timeout=60
            )
            await sup.fleet.apply([with_maintenance(demo, defrag, 2)])
            shrunk = await sup.wait_for(
                demo.ref,
                lambda s: all(
                    (m.db_size or 0) < bloated_size // 2 for m, bloated_size in _paired(s, bloated)
                ),
                timeout=120,
            )
            await workload.wait_for_more(50)
            stopped = time.monotonic_ns()
            nursery.cancel_scope.cancel()

        steps = [
            (reason, message.split()[1] if reason == "MemberDefragmented" else message)
            for ref, reason, message in sup.recorder.events
            if ref == demo.ref and reason in ("MemberDefragmented", "LeaderMoved")
        ]
        defragmented = [name for reason, name in steps if reason == "MemberDefragmented"]
        assert sorted(defragmented) == sorted(m.name for m in bloated.members), steps
        assert [r for r, _ in steps].count("LeaderMoved") == 1, steps
        # The leader when the round reached it (the workload may have moved it since `bloated`) ...
        move = next(m for r, m in steps if r == "LeaderMoved")
        moved_off = re.search(r"moving leadership off (\S+) ", move)[1]
        assert defragmented[-1] == moved_off, steps  # ... goes last ...
        assert [r for r, _ in steps][-2:] == ["LeaderMoved", "MemberDefragmented"], steps  # after the move
        for message in (m for _, r, m in sup.recorder.events if r == "MemberDefragmented"):
            assert re.search(r"\): \d+ bytes reclaimed \(.* MiB -> .* MiB\) in \d+\.\d+s$", message), message
        # The metrics get the numbers as data beside each Event, the same as the message says.
        measured = [
            m for ref, r, m in sup.recorder.measurements if ref == demo.ref and r == "MemberDefragmented"
        ]
        assert len(measured) == len(defragmented), measured
        for m in measured:
            assert isinstance(m, Defragmented) and m.reclaimed_bytes > 0 and m.seconds > 0, m
        assert all(sizes(shrunk)[name] < sizes(bloated)[name] // 2 for name in sizes(bloated))

        # Defragmenting fails no request. The one leadership move may: while a leader hands
        # over, raft drops new proposals (ProposalDropped), and one a follower forwarded to it
        # is lost until etcd's request timeout. Nothing else may fail, nor fail otherwise,
        # besides operations cut short by the cancel at the end.
        handover = _handover_window(sup.recorder.events, seen_at, demo.ref)
        failed = [
            op
            for op in workload.history.operations
            if op.outcome in (FAILED, UNKNOWN)
            and op.returned < stopped
            and not (_overlaps(op, handover) and (op.error or "").startswith(HANDOVER_ERRORS))
        ]
        assert failed == [], handover
        result = await workload.check(tmp_path / "history")
        assert result.ok, result.report


# What etcd answers a request caught by a leadership hand-over (supervisor.etcd.errors' names).
HANDOVER_ERRORS = ("ProposalDropped:", "RequestTimedOut:", "LeaderChanged:", "NoLeader:")


async def stamp_events(recorder, seen_at: list[int]) -> None:
    """Note the monotonic time each event the recorder gets is first seen (``seen_at[i]`` for
    ``recorder.events[i]``), for as long as it runs."""
    while True:
        seen_at.extend(time.monotonic_ns() for _ in range(len(recorder.events) - len(seen_at)))
        await recorder.changed.wait()


def _handover_window(events, seen_at: list[int], ref) -> tuple[int, int]:
    """From the event before the cluster's LeaderMoved (the last follower defragmented) to it."""
    ours = [(stamp, reason) for (r, reason, _), stamp in zip(events, seen_at, strict=False) if r == ref]
    moved = next(i for i, (_, reason) in enumerate(ours) if reason == "LeaderMoved")
    return ours[moved - 1][0], ours[moved][0]


def _overlaps(op, window: tuple[int, int]) -> bool:
    return op.call <= window[1] and op.returned >= window[0]


def _fragmented(member, defrag: DefragSpec) -> bool:
    """The member's status shows at least what defrag's trigger asks for (a half free, 8 MiB)."""
    size, in_use = member.db_size or 0, member.db_size_in_use or 0
    free = size - in_use if in_use else 0
    return size > 20 * MiB and free >= defrag.fragmentation_ratio * size and free >= 8 * MiB


def _paired(status: ClusterStatus, before: ClusterStatus):
    earlier = sizes(before)
    return [(m, earlier.get(m.name, 0)) for m in status.members]


async def fill_until_nospace(
    client: EtcdClient, *, value: bytes
) -> tuple[dict[bytes, bytes], tuple[bytes, bytes]]:
    """Write until the NOSPACE alarm refuses a put: what was acknowledged, key by key, and the
    refused put (etcd applies the put that crosses the quota, then answers NOSPACE)."""
    written: dict[bytes, bytes] = {}
    for n in range(100_000):
        key = f"/fill/{n % 8}".encode()  # 8 keys written over and over: history, little live data
        try:
            await client.put(key, value + str(n).encode())
        except NoSpace:
            return written, (key, value + str(n).encode())
        written[key] = value + str(n).encode()
    raise AssertionError("never ran out of space")


async def test_nospace_recovers_by_itself_and_keeps_every_key(tmp_path):
    async with open_local_supervisor(tmp_path, children=children) as sup:
        # A periodic retention longer than the test: the first try keeps the whole history (no
        # revision is known to be that old). If defragmenting alone frees too little, everything
        # is compacted next (on etcd 3.5.35 here it may free just enough: 16.5 -> 13.8 MiB of a
        # 16 MiB quota leaves the tenth the disarm asks for; the autojump-clock test in
        # tests/actors/test_defrag_timing.py pins the fallback down).
        hour = AutoCompactionSpec(CompactionMode.PERIODIC, "1h")
        small = MaintenanceSpec(auto_compaction=hour, quota_backend_bytes="16Mi")
        demo = with_maintenance(resource(size=3), small, 1)
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        urls = [m.client_url for m in status.members]
        async with open_etcd_client(urls, call_timeout=10.0) as client:
            written, (refused_key, refused) = await fill_until_nospace(client, value=b"v" * 100 * 1024)
            alarmed_at = trio.current_time()
            await sup.wait_for(
                demo.ref, lambda s: condition(s, "SpaceAvailable").status == "False", timeout=30
            )

            async def accepted() -> bool:
                try:
                    await client.put(b"/after", b"accepted")
                except EtcdError:
                    return False
                return True

            await eventually(accepted, within=60, every=0.2, what="a write accepted after the NOSPACE alarm")
            recovered_in = trio.current_time() - alarmed_at
            for key, value in written.items():
                assert await client.get(key) in ({value, refused} if key == refused_key else {value}), key
        await sup.wait_for(demo.ref, lambda s: condition(s, "SpaceAvailable").status == "True", timeout=30)
        reasons = sup.recorder.reasons(demo.ref)
        compactions = [m for _, r, m in sup.recorder.events if r == "HistoryCompacted"]
        assert len(compactions) in (1, 2), reasons
        assert reasons.count("MemberDefragmented") == 3 * len(compactions), reasons
        assert "whole history (autoCompaction's retention) is kept" in compactions[0], compactions
        assert all("keeping" not in m for m in compactions[1:]), compactions
        assert "NospaceAlarmDisarmed" in reasons
        print(f"NOSPACE alarm to first accepted write: {recovered_in:.1f}s")


async def keep_writing(client: EtcdClient, value: bytes) -> None:
    """New keys, through every NOSPACE refusal: what a client that does not give up does."""
    for n in range(10**6):
        try:
            await client.put(f"/fill/{n}".encode(), value)
        except EtcdError:
            await trio.sleep(0.1)


def flags_of(pid: int) -> set[str]:
    return set(Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0"))


async def test_maintenance_flags_roll_members_and_a_raised_quota_ends_a_nospace_the_live_data_caused(
    tmp_path,
):
    async with open_local_supervisor(tmp_path, children=children) as sup:
        demo = resource(size=3)
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)

        # 1. Compaction and a quota set on a running cluster: members restart with them one at a
        # time, followers first, the leader last after leadership moved; a client workload
        # through it stays linearizable.
        workload = KvWorkload(endpoints=[m.client_url for m in status.members], max_operations=100_000)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            nursery.start_soon(follow_members, sup, demo.ref, workload)
            await workload.wait_for_more(50)
            leader = next(m.name for m in status.members if m.role.value == "leader")
            start = len(sup.recorder.events)
            compaction = AutoCompactionSpec(CompactionMode.REVISION, "1000")
            tight = MaintenanceSpec(auto_compaction=compaction, quota_backend_bytes="16Mi")
            await sup.fleet.apply([with_maintenance(demo, tight, 2)])
            status = await sup.wait_for(
                demo.ref,
                lambda s: is_healthy(s, 3) and sup.recorder.reasons(demo.ref).count("MemberRolled") == 3,
                timeout=120,
            )
            await workload.wait_for_more(50)
            nursery.cancel_scope.cancel()
        steps = rolled_since(sup.recorder.events, start)
        rolled = [name for reason, name in steps if reason == "MemberRolled"]
        assert sorted(rolled) == ["demo-0", "demo-1", "demo-2"] and rolled[-1] == leader, steps
        assert steps[-2][0] == "LeaderMoved", steps
        assert [reason for reason, _ in steps].count("LeaderMoved") <= 2, steps
        for m in await sup.runtime.list_members(demo.ref):
            assert m.pid is not None
            wanted = {f"--quota-backend-bytes={16 * MiB}", "--auto-compaction-mode=revision"}
            assert wanted <= flags_of(m.pid), m.name
        verdict = await workload.check(tmp_path / "history")
        assert verdict.ok, verdict.report

        # 2. Live data that outgrows the quota: recoveries free room while there is history to
        # free; then it is reported once, and nothing more is tried.
        urls = [m.client_url for m in status.members]
        async with open_etcd_client(urls, call_timeout=10.0) as client, trio.open_nursery() as writers:
            writers.start_soon(keep_writing, client, b"v" * 100 * 1024)
            stuck = await sup.wait_for(
                demo.ref,
                lambda s: condition(s, "SpaceAvailable").reason == "LiveDataExceedsQuota",
                timeout=90,
            )
            assert "quotaBackendBytes" in condition(stuck, "SpaceAvailable").message
            before = list(sup.recorder.reasons(demo.ref))
            await trio.sleep(3)  # writes keep being refused meanwhile
            writers.cancel_scope.cancel()
        after = sup.recorder.reasons(demo.ref)
        assert after == before, after[len(before) :]
        assert before.count("LiveDataExceedsQuota") == 1, before

        # 3. Raising the quota is the fix: the members restart with it one at a time (the
        # cluster available throughout), then the alarm is disarmed and writes are accepted.
        start, published = len(sup.recorder.events), len(sup.recorder.history)
        roomy = MaintenanceSpec(auto_compaction=compaction, quota_backend_bytes="64Mi")
        await sup.fleet.apply([with_maintenance(demo, roomy, 3)])
        await sup.wait_for(demo.ref, lambda s: condition(s, "SpaceAvailable").status == "True", timeout=120)
        reasons = [reason for _, reason, _ in sup.recorder.events[start:]]
        assert reasons.count("MemberRolled") == 3 and "NospaceAlarmDisarmed" in reasons, reasons
        last_roll = max(i for i, r in enumerate(reasons) if r == "MemberRolled")
        assert reasons.index("NospaceAlarmDisarmed") > last_roll, reasons
        statuses = [s for ref, s in sup.recorder.history[published:] if ref == demo.ref]
        unavailable = [s.message for s in statuses if condition(s, "Available").status != "True"]
        assert not unavailable, unavailable
        async with open_etcd_client(urls, call_timeout=10.0) as client:
            await client.put(b"/after", b"accepted")

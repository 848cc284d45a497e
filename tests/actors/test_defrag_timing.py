"""The defrag actor and the maintenance planning together, on the autojump clock: when rounds
start, the order within one, and never two defrags at once."""

from datetime import UTC, datetime

import attrs
import trio

from actors.errors import EtcdUnavailable
from actors.maintenance.actor import defrag_child
from actors.model import (
    AutoCompactionSpec,
    ClusterResource,
    ClusterSpec,
    CompactionMode,
    DefragSpec,
    MaintenanceSpec,
)
from actors.platform import open_supervisor
from tests.actors.world import REF, TIMING, MemoryWorld, platform

MiB = 2**20
# Wall time for the schedule: midnight UTC plus the virtual clock.
MIDNIGHT = datetime(2026, 1, 1, tzinfo=UTC).timestamp()


@attrs.define
class MaintainedWorld(MemoryWorld):
    """MemoryWorld with database sizes, a leader that can move, and defrags that take time."""

    leader: int = 1
    db: dict = attrs.field(factory=dict)  # member id -> (size, in use)
    defrags: list = attrs.field(factory=list)  # (start, end, name, was leader)
    defrag_seconds: float = 2.0

    async def member_health(self, client_url):
        h = await super().member_health(client_url)
        size, in_use = self.db.setdefault(h.member_id, (100 * MiB, 10 * MiB))
        return attrs.evolve(h, leader_id=self.leader, db_size=size, db_size_in_use=in_use)

    async def move_leader(self, endpoints, target_id):
        self.leader = target_id

    async def defragment(self, client_url):
        me = next(m for m in self.etcd.values() if client_url in m.client_urls)
        if any(end is None for _, end, _, _ in self.defrags):
            raise AssertionError("two defrags at once")
        self.defrags.append((trio.current_time(), None, me.name, me.id == self.leader))
        await trio.sleep(self.defrag_seconds)
        _, in_use = self.db[me.id]
        self.db[me.id] = (in_use, in_use)
        start, _, name, led = self.defrags[-1]
        self.defrags[-1] = (start, trio.current_time(), name, led)

    async def compact(self, endpoints, revision):
        raise EtcdUnavailable("not used here")

    async def disarm_nospace(self, endpoints):
        return 0


async def run(world: MaintainedWorld, defrag: DefragSpec, seconds: float) -> None:
    await run_maintained(world, MaintenanceSpec(defrag=defrag), seconds)


async def run_maintained(world: MaintainedWorld, maintenance: MaintenanceSpec, seconds: float) -> None:
    spec = ClusterSpec(size=3, tls_enabled=False, maintenance=maintenance)
    child = defrag_child(clock=lambda: MIDNIGHT + trio.current_time(), wake_every=1.0)
    async with open_supervisor(platform(world), timing=TIMING, children=[child]) as fleet:
        await fleet.apply([ClusterResource(REF, spec)])
        await trio.sleep(seconds)


def rounds(world: MaintainedWorld) -> list[list[tuple[str, bool]]]:
    """Defrags grouped by round (a gap of a minute or more between rounds)."""
    out: list[list[tuple[str, bool]]] = []
    last_end = float("-inf")
    for start, end, name, led in world.defrags:
        if start - last_end >= 60:
            out.append([])
        out[-1].append((name, led))
        last_end = end
    return out


async def test_fragmentation_starts_one_round_followers_first_and_never_two_at_once(autojump_clock):
    world = MaintainedWorld()
    await run(world, DefragSpec(fragmentation_ratio=0.5, min_reclaim="64Mi"), seconds=300)
    # One round: the probes that still show the old sizes for a tick start no second one.
    (only,) = rounds(world)
    assert sorted(name for name, _ in only) == ["demo-0", "demo-1", "demo-2"]
    assert not any(led for _, led in only)  # the leader was never blocked: it moved first
    assert only[-1][0] == "demo-0"  # the first leader, last
    reasons = [reason for _, reason, _ in world.events]
    assert reasons.count("DefragScheduled") == 1 and reasons.count("LeaderMoved") == 1
    assert all(end - start == world.defrag_seconds for start, end, _, _ in world.defrags)


async def test_a_schedule_defragments_every_member_at_each_firing(autojump_clock):
    world = MaintainedWorld()
    # Nothing is fragmented enough (minReclaim is out of reach): only the schedule starts rounds.
    schedule = DefragSpec(schedule="*/5 * * * *", fragmentation_ratio=0.5, min_reclaim="1Gi")
    await run(world, schedule, seconds=11 * 60)
    starts = [start for start, _, _, _ in world.defrags]
    assert [len(r) for r in rounds(world)] == [3, 3]
    assert 300 <= starts[0] < 310 and 600 <= starts[3] < 610  # at 00:05 and 00:10
    assert all(not led for r in rounds(world) for _, led in r)


@attrs.define
class FillingWorld(MaintainedWorld):
    """Written at a revision a second until the NOSPACE alarm at `alarm_at` (writes refused
    from then on) until it is disarmed; a compaction frees what `freed_by` says."""

    alarm_at: float = 300.0
    disarmed: bool = False
    compactions: list = attrs.field(factory=list)  # (at, revision compacted to, current)
    full_compaction_needed: bool = False  # only compacting everything brings the data under quota

    def current(self) -> int:
        return 100 + int(min(trio.current_time(), self.alarm_at))

    async def member_health(self, client_url):
        h = await super().member_health(client_url)
        alarmed = trio.current_time() >= self.alarm_at and not self.disarmed
        return attrs.evolve(h, revision=self.current(), alarms=("NOSPACE",) if alarmed else ())

    async def revision(self, endpoints):
        return self.current()

    async def compact(self, endpoints, revision):
        self.compactions.append((trio.current_time(), revision, self.current()))
        if revision == self.current() or not self.full_compaction_needed:
            self.db = {i: (size, 2 * MiB) for i, (size, _) in self.db.items()}

    async def disarm_nospace(self, endpoints):
        self.disarmed = True
        return 1


def periodic(retention: str, quota: str) -> MaintenanceSpec:
    return MaintenanceSpec(
        auto_compaction=AutoCompactionSpec(CompactionMode.PERIODIC, retention), quota_backend_bytes=quota
    )


async def test_nospace_keeps_a_periodic_retention_compacting_to_the_revision_seen_that_long_ago(
    autojump_clock,
):
    world = FillingWorld(db={i: (15 * MiB, 15 * MiB) for i in (1, 2, 3)})
    await run_maintained(world, periodic("60s", "16Mi"), seconds=400)
    ((at, compacted_to, current),) = world.compactions
    # What was written in the last minute before the compaction is kept (revision r was
    # current at second r - 100); the sample found is at most a tenth of the retention older.
    assert current - (60 + 6 + TIMING.tick) <= compacted_to <= 100 + int(at - 60) < current
    assert world.disarmed
    reasons = [reason for _, reason, _ in world.events]
    assert reasons.count("MemberDefragmented") == 3 and "NospaceAlarmDisarmed" in reasons
    (compacted,) = [message for _, reason, message in world.events if reason == "HistoryCompacted"]
    assert f"revision {compacted_to}, keeping the last 60s of history" in compacted


async def test_a_periodic_retention_that_frees_too_little_falls_back_to_compacting_everything(
    autojump_clock,
):
    world = FillingWorld(db={i: (15 * MiB, 15 * MiB) for i in (1, 2, 3)}, full_compaction_needed=True)
    # A retention longer than the supervisor has watched: the first try compacts nothing.
    await run_maintained(world, periodic("1h", "16Mi"), seconds=400)
    assert [(revision, current) for _, revision, current in world.compactions] == [(400, 400)]
    assert world.disarmed
    reasons = [reason for _, reason, _ in world.events]
    assert reasons.count("HistoryCompacted") == 2 and reasons.count("MemberDefragmented") == 6, reasons
    first = next(message for _, reason, message in world.events if reason == "HistoryCompacted")
    assert "no revision is known to be 1h old yet" in first


async def test_a_step_longer_than_the_health_ttl_never_shows_the_cluster_unavailable(autojump_clock):
    """No member is asked while a step runs, so their last answers age meanwhile: that silence
    is no sign of trouble, and the status must not say the quorum is lost after the step."""
    world = MaintainedWorld(defrag_seconds=TIMING.health_ttl + 2)
    await run(world, DefragSpec(fragmentation_ratio=0.5, min_reclaim="64Mi"), seconds=120)
    assert len(world.defrags) == 3
    formed = next(i for i, (_, s) in enumerate(world.statuses) if s.phase.value == "Running")
    unavailable = [
        (at, s.message)
        for at, s in world.statuses[formed:]
        if next(c for c in s.conditions if c.type == "Available").status != "True"
    ]
    assert unavailable == []

"""Defragmentation rounds and NOSPACE recovery, planned step by step (pure).

A round is walked the way the cluster actor walks it: plan, carry the step's effect on the
board and the facts, plan again.
"""

import itertools

import attrs

from actors.actions import Wait
from actors.maintenance.board import DefragRound, MaintenanceBoard
from actors.maintenance.condition import space_condition
from actors.maintenance.revisions import SAMPLES_PER_WINDOW, RevisionSamples, revision_at_least
from actors.maintenance.steps import (
    CompactForSpace,
    DefragMember,
    DisarmNospace,
    MoveLeaderToDefrag,
    ReportSpaceExhausted,
)
from actors.maintenance.trigger import fragmented_members
from actors.model import (
    AutoCompactionSpec,
    ClusterSpec,
    CompactionMode,
    DefragSpec,
    MaintenanceSpec,
    MemberConfig,
)
from actors.plan import plan
from actors.plan.maintenance import maintain
from tests.unit.facts import EXITED, cluster, em, hl, observed, rt

MiB = 2**20
THREE = ClusterSpec(size=3)


def facts(leader=0, size=3, db=(100 * MiB, 10 * MiB), alarms=()):
    runtime, members, health = cluster(size, leader)
    health = {
        name: attrs.evolve(h, db_size=db[0], db_size_in_use=db[1], alarms=alarms)
        for name, h in health.items()
    }
    return runtime, members, health


def seen(board, runtime, members, health):
    return attrs.evolve(observed(runtime, members, health), maintenance=board.round)


def walk(spec, board, leader=0, alarms=("NOSPACE",), size_after=5 * MiB, limit=20):
    """Plan and apply until nothing is left; the steps taken, in order."""
    runtime, members, health = facts(leader, alarms=alarms)
    steps = []
    for _ in range(limit):
        step = plan(spec, seen(board, runtime, members, health))
        if step is None or isinstance(step, Wait):
            steps.append(step)
            return steps
        steps.append(step)
        match step:
            case CompactForSpace():
                names = frozenset(m.name for m in members)
                board.restart_recovery(
                    DefragRound("NOSPACE alarm", names, for_space=True, compacted_fully=True)
                )
            case DefragMember(name=name):
                board.defragmented(name, size_after)
            case MoveLeaderToDefrag(from_id=from_id):
                board.mark(moved_off=from_id)  # the probes still show the old leader
            case DisarmNospace():
                board.mark(disarmed=True)
                health = {n: attrs.evolve(h, alarms=()) for n, h in health.items()}
            case ReportSpaceExhausted():
                board.mark(exhausted=True)
    raise AssertionError(f"no end: {steps}")


def test_a_round_goes_followers_first_then_moves_leadership_and_does_the_old_leader_last():
    board = MaintenanceBoard()
    board.begin(DefragRound("schedule", frozenset({"demo-0", "demo-1", "demo-2"})))
    steps = walk(THREE, board, leader=0, alarms=())
    assert steps == [
        DefragMember("demo-1", "schedule"),
        DefragMember("demo-2", "schedule"),
        MoveLeaderToDefrag(
            "demo-1", 1001, reason="moving leadership off demo-0 to defragment it", from_id=1000
        ),
        DefragMember("demo-0", "schedule"),
        None,
    ]
    assert board.round is None  # an ordinary round ends with its last member


def test_a_one_member_cluster_is_defragmented_without_a_leadership_move():
    board = MaintenanceBoard()
    board.begin(DefragRound("schedule", frozenset({"demo-0"})))
    runtime, members, health = facts(size=1)
    assert maintain(ClusterSpec(size=1), seen(board, runtime, members, health)) == DefragMember(
        "demo-0", "schedule"
    )


def test_never_while_a_member_is_unhealthy_or_membership_is_changing():
    board = MaintenanceBoard()
    board.begin(DefragRound("schedule", frozenset({"demo-0", "demo-1", "demo-2"})))
    runtime, members, health = facts()
    runtime[2] = rt(2, state=EXITED)
    step = maintain(THREE, seen(board, runtime, members, health))
    assert isinstance(step, Wait) and "unhealthy: demo-2" in step.reason
    runtime, members, health = facts()
    members.append(em(3, learner=True))
    step = maintain(THREE, seen(board, runtime, members, health))
    assert isinstance(step, Wait) and "membership change" in step.reason
    step = maintain(ClusterSpec(size=5), seen(board, *facts()))
    assert isinstance(step, Wait) and "membership change" in step.reason
    # and the earlier planners come first: a stopped member is restarted, not waited on
    runtime, members, health = facts()
    runtime[2] = rt(2, state=EXITED)
    assert type(plan(THREE, seen(board, runtime, members, health))).__name__ == "StartMember"


def test_nospace_compacts_defragments_every_member_and_disarms():
    board = MaintenanceBoard()
    steps = walk(THREE, board, leader=2)
    assert steps[0] == CompactForSpace(None)
    assert [s.name for s in steps if isinstance(s, DefragMember)] == ["demo-0", "demo-1", "demo-2"]
    assert isinstance(steps[-3], DefragMember) and isinstance(steps[-2], DisarmNospace)
    assert steps[-1] is None
    assert board.round is not None and board.round.disarmed  # the defrag actor ends it once seen


def test_nospace_keeps_a_revision_retention_on_the_first_try():
    spec = ClusterSpec(
        maintenance=MaintenanceSpec(auto_compaction=AutoCompactionSpec(CompactionMode.REVISION, "1000"))
    )
    assert maintain(spec, seen(MaintenanceBoard(), *facts(alarms=("NOSPACE",)))) == CompactForSpace(1000)


def test_live_data_over_the_quota_is_reported_once_then_waits_until_the_quota_is_raised():
    small = ClusterSpec(maintenance=MaintenanceSpec(quota_backend_bytes="16Mi"))
    board = MaintenanceBoard()
    steps = walk(small, board, size_after=15 * MiB)
    assert isinstance(steps[-2], ReportSpaceExhausted) and isinstance(steps[-1], Wait)
    assert "quotaBackendBytes" in steps[-1].reason
    assert [type(s).__name__ for s in steps].count("CompactForSpace") == 1  # no loop
    runtime, members, health = facts(alarms=("NOSPACE",))
    condition = space_condition(small, seen(board, runtime, members, health), steps[-1])
    assert (condition.status, condition.reason) == ("False", "LiveDataExceedsQuota")
    raised = ClusterSpec(maintenance=MaintenanceSpec(quota_backend_bytes="64Mi"))
    assert isinstance(maintain(raised, seen(board, runtime, members, health)), DisarmNospace)


def test_a_first_compaction_that_kept_history_and_freed_too_little_compacts_everything():
    small = ClusterSpec(maintenance=MaintenanceSpec(quota_backend_bytes="16Mi"))
    board = MaintenanceBoard()
    board.begin(
        DefragRound("NOSPACE alarm", frozenset(), for_space=True, sizes_after=(("demo-0", 15 * MiB),))
    )
    assert maintain(small, seen(board, *facts(alarms=("NOSPACE",)))) == CompactForSpace(None)


def test_space_condition():
    runtime, members, health = facts(alarms=("NOSPACE",))
    alarmed = space_condition(THREE, observed(runtime, members, health), CompactForSpace(None))
    assert (alarmed.status, alarmed.reason) == ("False", "NoSpace")
    assert "compacting" in alarmed.message
    fine = space_condition(THREE, observed(*facts()), None)
    assert (fine.status, fine.reason) == ("True", "WithinQuota")


def test_fragmentation_needs_both_the_ratio_and_the_bytes():
    defrag = DefragSpec(fragmentation_ratio=0.5, min_reclaim="64Mi")
    runtime, members, health = facts(db=(200 * MiB, 50 * MiB))
    health["demo-1"] = attrs.evolve(health["demo-1"], db_size_in_use=150 * MiB)  # 25% free
    health["demo-2"] = attrs.evolve(health["demo-2"], db_size=100 * MiB, db_size_in_use=40 * MiB)  # 60 MiB
    assert fragmented_members(defrag, observed(runtime, members, health)) == {"demo-0"}
    assert fragmented_members(defrag, observed(runtime, members, {"demo-0": hl(0)})) == frozenset()


def test_a_raised_quota_rolls_out_before_the_alarm_is_disarmed():
    small = ClusterSpec(maintenance=MaintenanceSpec(quota_backend_bytes="16Mi"))
    raised = ClusterSpec(maintenance=MaintenanceSpec(quota_backend_bytes="64Mi"))
    board = MaintenanceBoard()
    walk(small, board, size_after=15 * MiB)  # reported, and stopped
    runtime, members, health = facts(alarms=("NOSPACE",))
    on_old = [attrs.evolve(r, config="old") for r in runtime]
    old = attrs.evolve(seen(board, on_old, members, health), desired=MemberConfig("new"))
    assert maintain(raised, old) is None  # the rollout planner, after this one, restarts them
    assert type(plan(raised, old)).__name__ in ("RollMember", "MoveLeader")
    on_new = [attrs.evolve(r, config="new") for r in runtime]
    rolled = attrs.evolve(seen(board, on_new, members, health), desired=MemberConfig("new"))
    assert isinstance(maintain(raised, rolled), DisarmNospace)


def periodic(retention: str, quota: str | None = None) -> ClusterSpec:
    compaction = AutoCompactionSpec(CompactionMode.PERIODIC, retention)
    return ClusterSpec(maintenance=MaintenanceSpec(auto_compaction=compaction, quota_backend_bytes=quota))


def test_nospace_keeps_a_periodic_retention_on_the_first_try():
    spec = periodic("1m")
    alarmed = seen(MaintenanceBoard(), *facts(alarms=("NOSPACE",)))
    # Samples 90, 65, 30 and 5 seconds old: the newest at least a minute old is kept whole.
    ages = ((90.0, 400), (65.0, 500), (30.0, 600), (5.0, 700))
    assert maintain(spec, attrs.evolve(alarmed, revision_ages=ages)) == CompactForSpace(
        None, up_to=500, retention="1m"
    )
    # None that old yet (the supervisor started since): the whole history is kept on a first try.
    young = attrs.evolve(alarmed, revision_ages=ages[2:])
    assert maintain(spec, young) == CompactForSpace(None, up_to=0, retention="1m")


def test_a_periodic_retention_that_frees_too_little_falls_back_to_compacting_everything():
    spec = periodic("1m", quota="16Mi")
    board = MaintenanceBoard()
    board.begin(
        DefragRound("NOSPACE alarm", frozenset(), for_space=True, sizes_after=(("demo-0", 15 * MiB),))
    )
    assert maintain(spec, seen(board, *facts(alarms=("NOSPACE",)))) == CompactForSpace(None)


def test_revision_samples_are_a_tenth_of_the_retention_apart_and_bounded():
    samples = RevisionSamples()
    for second in range(0, 1000):
        samples = samples.record(float(second), 10 * second, window=60.0)
    ages = samples.ages(999.0)
    assert len(ages) <= SAMPLES_PER_WINDOW + 2
    assert all(older - newer >= 6 for (older, _), (newer, _) in itertools.pairwise(ages))
    # The newest revision at least a minute old, within a tenth of the retention of it.
    found = revision_at_least(ages, 60.0)
    assert found is not None and 10 * (999 - 66) <= found <= 10 * (999 - 60)
    assert revision_at_least(ages, 10_000.0) is None
    # A lagging member's lower revision never moves the record back; no window keeps nothing.
    newest = samples.samples[-1][1]
    assert samples.record(2000.0, 5, window=60.0).samples[-1] == (2000.0, newest)
    assert samples.record(2000.0, 5, window=None) == RevisionSamples()

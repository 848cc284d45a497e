"""Quorum-loss recovery decisions: when quorum is gone for good, from whom, and never while a
majority may still return."""

import attrs

from actors.actions import StartMember, StartSeed, Wait
from actors.model import (
    BackupSpec,
    ClusterSpec,
    DisasterRecoverySpec,
    LastBackup,
    LocalStore,
    RecoveryMode,
    StoreSpec,
)
from actors.plan import plan
from actors.plan.quorum import hold_without_quorum
from actors.plan.recovery import RECOVERY_BOUND_MINIMUM, recover_quorum, recovery_bound
from actors.recovery import RecoverFromBackup, RecoverFromSurvivor
from tests.unit.facts import EXITED, cluster, hl, observed, rt

AUTOMATIC = ClusterSpec(size=3, disaster_recovery=DisasterRecoverySpec(RecoveryMode.AUTOMATIC))
MANUAL = ClusterSpec(size=3)
STORE = StoreSpec(local=LocalStore("/backups"))


def no_leader(i, applied, revision):
    """A survivor's Status answer without quorum: no leader, etcd says so in its errors."""
    return attrs.evolve(
        hl(i, index=applied), leader_id=0, errors=("etcdserver: no leader",), revision=revision
    )


def majority_lost(n, lost, *, answers):
    """n voters; `lost` killed with their data deleted; the rest answer as given (name -> health)."""
    runtime, members, _ = cluster(n)
    for i in lost:
        runtime[i] = rt(i, EXITED, has_data=False)
    return observed(runtime, members, answers)


def test_data_lost_by_a_majority_of_three_rebuilds_from_the_survivor_in_automatic_mode():
    seen = attrs.evolve(majority_lost(3, [0, 1], answers={"demo-2": no_leader(2, 90, 40)}), revision_seen=45)
    step = plan(AUTOMATIC, seen)
    assert step == RecoverFromSurvivor(
        "demo-2",
        revision=40,
        revision_seen=45,
        lost=step.lost if isinstance(step, RecoverFromSurvivor) else "",
    )
    assert "demo-0: its data is gone" in step.lost and "2 of 3" in step.lost
    assert "up to 5 revisions after 40 may be lost" in step.describe()
    # Manual: nothing is rebuilt; the status says quorum is gone for good and a person must act.
    assert recover_quorum(MANUAL, seen) is None
    waiting = plan(MANUAL, seen)
    assert isinstance(waiting, Wait) and "lost for good" in waiting.reason and "Manual" in waiting.reason


def test_the_most_advanced_survivor_of_five_is_chosen():
    answers = {"demo-3": no_leader(3, 120, 60), "demo-4": no_leader(4, 118, 59)}
    step = recover_quorum(ClusterSpec(size=5, disaster_recovery=AUTOMATIC.disaster_recovery),
                          majority_lost(5, [0, 1, 2], answers=answers))  # fmt: skip
    assert isinstance(step, RecoverFromSurvivor) and (step.name, step.revision) == ("demo-3", 60)


def test_a_minority_lost_is_no_recovery():
    seen = majority_lost(5, [0, 1], answers={f"demo-{i}": hl(i, 2) for i in (2, 3, 4)})
    assert recover_quorum(AUTOMATIC, seen) is None


def test_a_silent_majority_is_waited_for_until_the_bound():
    runtime, members, _ = cluster(3)
    answers = {"demo-2": no_leader(2, 90, 40)}
    bound = recovery_bound(AUTOMATIC)
    assert bound == RECOVERY_BOUND_MINIMUM  # unresponsiveAfter 30s: the minimum holds
    frozen_for = {"demo-0": bound - 1, "demo-1": bound - 1, "demo-2": 0.0}
    seen = attrs.evolve(observed(runtime, members, answers), unreachable_for=frozen_for)
    assert recover_quorum(AUTOMATIC, seen) is None  # frozen or partitioned: it may come back
    step = plan(AUTOMATIC, seen)
    assert isinstance(step, Wait) and step.reason.startswith("quorum lost: 0 of 3")
    gone_for_good = attrs.evolve(seen, unreachable_for={**frozen_for, "demo-0": bound, "demo-1": bound})
    step = recover_quorum(AUTOMATIC, gone_for_good)
    assert isinstance(step, RecoverFromSurvivor) and "unreachable for 300s" in step.lost


def test_every_survivor_answers_before_one_is_chosen():
    # demo-2 has data but is down: it is restarted first (it may be the most advanced).
    runtime, members, _ = cluster(5)
    for i in (0, 1, 2):
        runtime[i] = rt(i, EXITED, has_data=i == 2)
    seen = observed(runtime, members, {"demo-3": no_leader(3, 90, 40), "demo-4": no_leader(4, 90, 40)})
    assert recover_quorum(attrs.evolve(AUTOMATIC, size=5), seen) is None
    step = plan(attrs.evolve(AUTOMATIC, size=5), seen)
    assert isinstance(step, StartMember) and step.name == "demo-2"


def test_all_data_lost_recovers_from_the_newest_verified_backup():
    runtime = [rt(i, EXITED, has_data=False) for i in range(3)]
    backed_up = BackupSpec(store=STORE)
    spec = attrs.evolve(AUTOMATIC, backup=backed_up)
    backup = LastBackup("demo/backup-1", revision=77, size_bytes=1, verified=True, completion_time=0.0)
    seen = attrs.evolve(observed(runtime, None, {}), newest_verified_backup=backup, revision_seen=80)
    step = plan(spec, seen)
    assert isinstance(step, RecoverFromBackup)
    assert (step.name, step.source.key, step.source.store, step.stale) == (
        "demo-3", "demo/backup-1", STORE, ("demo-0", "demo-1", "demo-2"),
    )  # fmt: skip
    assert "revision 77" in step.describe() and "up to 3 revisions" in step.describe()
    # Delta backups reaching past the snapshot: restored up to where they reach.
    step = plan(spec, attrs.evolve(seen, deltas_reach=79))
    assert isinstance(step, RecoverFromBackup) and (step.source.revision, step.revision) == (79, 79)
    assert (
        "with its delta backups at revision 79" in step.describe() and "up to 1 revisions" in step.describe()
    )
    # No verified backup, or Manual mode: the bootstrap planner's wait stands.
    for spec_, seen_ in ((spec, attrs.evolve(seen, newest_verified_backup=None)), (MANUAL, seen)):
        waiting = plan(spec_, seen_)
        assert isinstance(waiting, Wait) and "every member lost its data" in waiting.reason


def test_a_cluster_that_had_members_and_has_no_pod_or_volume_left_is_restored_not_seeded_empty():
    # Kubernetes: every member's pod and claim deleted, so the runtime lists nothing at all.
    spec = attrs.evolve(AUTOMATIC, backup=BackupSpec(store=STORE))
    backup = LastBackup("demo/backup-1", revision=77, size_bytes=1, verified=True, completion_time=0.0)
    gone = attrs.evolve(observed([], None, {}), newest_verified_backup=backup, had_members=True)
    step = plan(spec, gone)
    assert isinstance(step, RecoverFromBackup)
    assert (step.name, step.source.key, step.stale) == ("demo-0", "demo/backup-1", ())
    # Manual mode, or no verified backup: it says so and waits; it never seeds an empty cluster.
    for spec_, seen_ in ((MANUAL, gone), (spec, attrs.evolve(gone, newest_verified_backup=None))):
        waiting = plan(spec_, seen_)
        assert isinstance(waiting, Wait), waiting
        assert "every member lost its data" in waiting.reason and "no member, pod or volume" in waiting.reason
    # A new cluster (nothing ever ran, no status listing members) is seeded as before.
    assert isinstance(plan(spec, attrs.evolve(gone, had_members=False)), StartSeed)
    # A lone member whose data is gone: the same, once the cluster had members (a size-1 cluster).
    lone = attrs.evolve(gone, runtime=(rt(0, EXITED, has_data=False),))
    assert isinstance(plan(spec, lone), RecoverFromBackup)
    assert isinstance(waiting := plan(MANUAL, lone), Wait) and "every member lost its data" in waiting.reason
    assert isinstance(plan(spec, attrs.evolve(lone, had_members=False)), StartSeed)  # interrupted bootstrap
    # With delta backups, not before the chunks after the backup are known (a restarted daemon).
    with_deltas = attrs.evolve(spec, backup=BackupSpec(store=STORE, delta_period="5s"))
    waiting = plan(with_deltas, gone)
    assert isinstance(waiting, Wait) and "looking up the delta backups after demo/backup-1" in waiting.reason
    step = plan(with_deltas, attrs.evolve(gone, deltas_reach=80))
    assert isinstance(step, RecoverFromBackup) and (step.source.revision, step.revision) == (80, 80)
    step = plan(with_deltas, attrs.evolve(gone, deltas_reach=77))  # listed: nothing after the backup
    assert isinstance(step, RecoverFromBackup) and (step.source.revision, step.revision) == (None, 77)


def test_quorum_guard_alone_says_lost_for_good_only_when_it_is():
    seen = majority_lost(3, [0], answers={"demo-2": no_leader(2, 90, 40)})
    step = hold_without_quorum(MANUAL, seen)
    assert isinstance(step, Wait) and "lost for good" not in step.reason  # demo-1 may return

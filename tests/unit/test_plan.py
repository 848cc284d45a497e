"""plan(): the ordered planners together make the same decisions as before they were split."""

import attrs

from actors.actions import (
    AddLearner,
    DeleteRuntimeMember,
    MoveLeader,
    PromoteLearner,
    RemoveMember,
    StartMember,
    StartSeed,
    Wait,
)
from actors.member_times import Vanishings
from actors.model import ClusterSpec, Vanished
from actors.plan import plan
from tests.unit.facts import ABSENT, EXITED, RUNNING, STARTING, cluster, em, hl, observed, rt, urls


def decide(size, runtime, members, health):
    return plan(ClusterSpec(size=size), observed(runtime, members, health))


def test_an_empty_cluster_starts_one_seed_member():
    assert decide(3, [], None, {}) == StartSeed("demo-0")


def test_a_healthy_seed_is_followed_by_one_learner():
    assert decide(3, *cluster(1)) == AddLearner("demo-1")


def test_an_added_learner_is_started_knowing_every_member():
    runtime, members, health = cluster(1)
    action = decide(
        3, [*runtime, rt(1, ABSENT, has_data=False)], [*members, em(1, learner=True, started=False)], health
    )
    assert action == StartMember(
        "demo-1",
        (("demo-0", urls(0).peer_url), ("demo-1", urls(1).peer_url)),
        reason="learner added; start it",
    )


def test_a_learner_whose_first_start_failed_is_started_again_saying_why():
    runtime, members, health = cluster(1)
    exited = attrs.evolve(rt(1, EXITED, failures=1), exit_code=1, last_error="cannot fetch cluster info")
    action = decide(3, [*runtime, exited], [*members, em(1, learner=True, started=False)], health)
    assert isinstance(action, StartMember) and action.name == "demo-1"
    assert action.reason == "learner exited with code 1 (cannot fetch cluster info); start it"


def test_a_learner_whose_pod_cannot_be_scheduled_says_why_instead_of_catching_up():
    runtime, members, health = cluster(1)
    pending = attrs.evolve(
        rt(1, STARTING, has_data=False), unschedulable="0/3 nodes are available: 3 Insufficient cpu."
    )
    step = decide(3, [*runtime, pending], [*members, em(1, learner=True, started=False)], health)
    assert step == Wait(
        "learner demo-1: pod cannot be scheduled: 0/3 nodes are available: 3 Insufficient cpu."
    )


def test_adding_a_member_again_backs_off_while_members_keep_vanishing_from_etcd():
    runtime, members, health = cluster(1)
    seen = observed(runtime, members, health)
    assert plan(ClusterSpec(size=2), seen) == AddLearner("demo-1")
    once = attrs.evolve(seen, vanished=Vanished("demo-1", 1, 0.0))
    assert plan(ClusterSpec(size=2), once) == AddLearner("demo-1")  # the first is not held
    again = attrs.evolve(seen, vanished=Vanished("demo-4", 4, 1.0))
    assert plan(ClusterSpec(size=2), again) == Wait(
        "demo-4 vanished from etcd's membership 4 times in a row (removed by something else?);"
        " adding a member again in 3s"
    )
    assert plan(ClusterSpec(size=2), attrs.evolve(again, vanished=Vanished("demo-4", 4, 4.0))) == AddLearner(
        "demo-1"
    )


def test_vanishings_count_until_a_member_joins():
    book = Vanishings()
    assert book.facts(0.0) is None
    book.vanished("demo-1", 1.0)
    book.vanished("demo-2", 3.0)
    assert book.facts(5.0) == Vanished("demo-2", 2, 2.0)
    book.joined()
    assert book.facts(6.0) is None


def test_a_learner_is_promoted_only_once_caught_up():
    runtime, members, health = cluster(1)
    runtime.append(rt(1))
    members.append(em(1, learner=True))
    lagging = decide(3, runtime, members, {**health, "demo-1": hl(1, applied=10, learner=True)})
    assert lagging == Wait("learner demo-1 catching up")
    caught_up = decide(3, runtime, members, {**health, "demo-1": hl(1, applied=95, learner=True)})
    assert caught_up == PromoteLearner("demo-1", 1001)


def test_nothing_else_changes_while_a_learner_is_in_flight():
    runtime, members, health = cluster(2)
    runtime.append(rt(2, STARTING, has_data=False))
    members.append(em(2, learner=True, started=False))
    assert isinstance(decide(5, runtime, members, health), Wait)


def test_a_learner_no_longer_needed_after_a_size_cut_is_removed():
    runtime, members, health = cluster(3)
    runtime.append(rt(3))
    members.append(em(3, learner=True))
    action = decide(3, runtime, members, {**health, "demo-3": hl(3, learner=True)})
    assert isinstance(action, RemoveMember) and action.member_id == 1003


def test_a_hung_follower_does_not_block_adding_a_member_but_a_lost_quorum_does():
    runtime, members, health = cluster(3)
    health["demo-1"] = None  # running, but its Status probe failed
    assert decide(5, runtime, members, health) == AddLearner("demo-3")
    health["demo-2"] = None
    assert decide(5, runtime, members, health) == Wait("quorum lost: 1 of 3 voting members healthy")


def test_a_converged_cluster_needs_nothing():
    assert decide(3, *cluster(3)) is None


def test_an_exited_member_is_restarted_with_its_data():
    runtime, members, health = cluster(3)
    runtime[2] = rt(2, EXITED)
    del health["demo-2"]
    action = decide(3, runtime, members, health)
    assert isinstance(action, StartMember) and action.name == "demo-2"


def test_a_crash_looping_member_is_replaced_when_quorum_allows():
    runtime, members, health = cluster(3)
    runtime[2] = rt(2, EXITED, failures=3)
    del health["demo-2"]
    assert decide(3, runtime, members, health) == RemoveMember(
        1002, "demo-2", reason="exited, 3 times in a row: data presumed corrupt"
    )


def test_a_member_whose_data_is_gone_is_removed_then_a_new_one_added():
    runtime, members, health = cluster(3)
    runtime[1] = rt(1, EXITED, has_data=False)
    del health["demo-1"]
    action = decide(3, runtime, members, health)
    assert action == RemoveMember(1001, "demo-1", reason="its data is gone")
    # After the removal the replacement gets a new name, never demo-1 again.
    runtime.pop(1)
    members.pop(1)
    assert decide(3, runtime, members, health) == AddLearner("demo-3")


def test_a_running_member_whose_data_was_deleted_is_replaced_without_waiting_for_it_to_die():
    runtime, members, health = cluster(3)
    runtime[1] = rt(1, RUNNING, has_data=False)
    assert decide(3, runtime, members, health) == RemoveMember(1001, "demo-1", reason="its data is gone")


def test_with_quorum_lost_members_come_back_from_data_and_membership_never_changes():
    runtime, members, health = cluster(3)
    runtime[1] = rt(1, EXITED)
    runtime[2] = rt(2, EXITED, failures=5)
    health = {"demo-0": health["demo-0"]}
    first = decide(3, runtime, members, health)
    assert isinstance(first, StartMember) and first.name == "demo-1"
    runtime[1] = rt(1, STARTING)
    second = decide(3, runtime, members, health)
    # Even a crash-looping member is restarted, not removed, while quorum is gone.
    assert isinstance(second, StartMember) and second.name == "demo-2"
    runtime[2] = rt(2, STARTING)
    assert decide(3, runtime, members, health) == Wait("quorum lost: 1 of 3 voting members healthy")


def test_scale_down_removes_unhealthy_members_first_then_the_newest_follower():
    runtime, members, health = cluster(5, leader=4)
    runtime[1] = rt(1, EXITED, has_data=True)
    del health["demo-1"]
    # demo-1 is down: restarting it comes first...
    assert isinstance(decide(3, runtime, members, health), StartMember)
    # ...unless it is starting, when it is still the first to go.
    runtime[1] = rt(1, STARTING)
    assert decide(3, runtime, members, health) == RemoveMember(1001, "demo-1", reason="size is 3")
    runtime, members, health = cluster(5, leader=4)
    assert decide(3, runtime, members, health) == RemoveMember(1003, "demo-3", reason="size is 3")


def test_leadership_moves_away_before_the_leader_is_removed():
    runtime, members, health = cluster(3, leader=0)
    runtime[0] = rt(0, STARTING)  # the leader as the others see it, unhealthy itself
    del health["demo-0"]
    assert decide(2, runtime, members, health) == MoveLeader("demo-1", 1001, reason="demo-0 is leaving")


def test_runtime_leftovers_unknown_to_etcd_are_deleted():
    runtime, members, health = cluster(3)
    runtime.append(rt(7, ABSENT, has_data=False))
    assert decide(3, runtime, members, health) == DeleteRuntimeMember("demo-7", reason="not a member of etcd")


def test_with_membership_unknown_members_with_data_restart_and_lost_data_is_reported():
    assert decide(3, [rt(0, EXITED), rt(1, EXITED)], None, {}) == StartMember(
        "demo-0", (), reason="exited; restart from its data while membership is unknown"
    )
    gone = decide(3, [rt(0, EXITED, has_data=False), rt(1, EXITED, has_data=False)], None, {})
    assert isinstance(gone, Wait) and "restore from backup" in gone.reason
    # A lone member that never ran is an interrupted bootstrap: start it as the seed.
    assert decide(3, [rt(0, ABSENT, has_data=False)], None, {}) == StartSeed("demo-0")


DRAINED = (
    "0/3 nodes are available: 1 node(s) were unschedulable, "
    "2 node(s) didn't match PersistentVolume's node affinity."
)


def test_a_voter_whose_pod_no_node_can_take_is_replaced_after_unresponsive_after():
    runtime, members, health = cluster(3, leader=1)
    del health["demo-0"]
    runtime[0] = attrs.evolve(rt(0, STARTING), unschedulable=DRAINED)
    seen = observed(runtime, members, health)
    # A scheduler that places it soon ends the wait: not yet (default unresponsiveAfter 30s).
    early = attrs.evolve(seen, unplaced_for={"demo-0": 29.0})
    assert not isinstance(plan(ClusterSpec(size=3), early), RemoveMember)
    late = attrs.evolve(seen, unplaced_for={"demo-0": 31.0})
    step = plan(ClusterSpec(size=3), late)
    assert isinstance(step, RemoveMember) and (step.name, step.member_id) == ("demo-0", 1000)
    assert "could not be scheduled for 31s" in step.reason and "didn't match PersistentVolume" in step.reason


def test_an_unplaced_voter_is_kept_when_removing_it_would_leave_no_healthy_quorum():
    runtime, members, health = cluster(3, leader=1)
    del health["demo-0"], health["demo-2"]  # demo-2 down too: 1 healthy of the 2 that would stay
    runtime[0] = attrs.evolve(rt(0, STARTING), unschedulable=DRAINED)
    seen = attrs.evolve(observed(runtime, members, health), unplaced_for={"demo-0": 300.0})
    assert not isinstance(plan(ClusterSpec(size=3), seen), RemoveMember)


def test_a_member_whose_node_never_confirms_its_stop_is_removed_then_its_leftover_forced():
    runtime, members, health = cluster(3, leader=1)
    del health["demo-2"]
    # Restarted for silence: its pod is terminating, and its node has not confirmed it.
    stuck = attrs.evolve(rt(2, EXITED), stranded=True)
    step = decide(3, [*runtime[:2], stuck], members, health)
    assert isinstance(step, RemoveMember) and step.name == "demo-2"
    assert "node does not act on its pod" in step.reason
    # Not yet overdue: the restart waits on the stop as before (no membership change).
    waiting = decide(3, [*runtime[:2], rt(2, EXITED)], members, health)
    assert not isinstance(waiting, RemoveMember)
    # Removed from etcd, the pod and claim are both being deleted: the leftover is deleted
    # again (forced by the runtime) only while its node never confirms.
    gone = [*runtime[:2], attrs.evolve(rt(2, EXITED), deleting=True, stranded=True)]
    assert decide(3, gone, members[:2], health) == DeleteRuntimeMember(
        "demo-2", reason="not a member of etcd"
    )
    pending = [*runtime[:2], attrs.evolve(rt(2, EXITED), deleting=True)]
    assert not isinstance(decide(3, pending, members[:2], health), DeleteRuntimeMember)


def test_a_stranded_member_is_kept_when_its_removal_would_cost_the_healthy_quorum():
    runtime, members, health = cluster(3, leader=1)
    del health["demo-2"], health["demo-0"]
    stuck = attrs.evolve(rt(2, EXITED), stranded=True)
    assert not isinstance(decide(3, [*runtime[:2], stuck], members, health), RemoveMember)


def test_a_learner_whose_pod_never_starts_on_its_node_is_removed_and_added_again():
    runtime, members, health = cluster(2, leader=1)
    learner = attrs.evolve(rt(2, STARTING, has_data=False), stranded=True)
    step = decide(3, [*runtime, learner], [*members, em(2, learner=True, started=False)], health)
    assert isinstance(step, RemoveMember) and (step.name, step.member_id) == ("demo-2", 1002)

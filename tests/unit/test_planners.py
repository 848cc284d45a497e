"""Each planner alone: what it answers, and when it stays silent so the next one may answer."""

import attrs

from actors.actions import (
    AddLearner,
    DeleteRuntimeMember,
    MoveLeader,
    PromoteLearner,
    RemoveMember,
    RestartMember,
    StartMember,
    StartSeed,
    Wait,
)
from actors.model import ClusterSpec, HealthSpec
from actors.plan import PLANNERS, plan
from actors.plan.bootstrap import membership_unknown
from actors.plan.data_loss import replace_lost_data
from actors.plan.learners import finish_learner
from actors.plan.leftovers import delete_leftovers
from actors.plan.quorum import hold_without_quorum
from actors.plan.restart import restart_delay, restart_stopped
from actors.plan.size import match_size
from actors.plan.unresponsive import heal_unresponsive
from tests.unit.facts import ABSENT, EXITED, STARTING, cluster, em, hl, observed, rt

THREE = ClusterSpec(size=3)


def healthy(n, leader=0):
    return observed(*cluster(n, leader))


def test_every_planner_is_silent_on_a_converged_cluster():
    facts = healthy(3)
    assert [p.__name__ for p in PLANNERS if p(THREE, facts) is not None] == []


def test_bootstrap_answers_only_while_membership_is_unknown():
    assert membership_unknown(THREE, observed([], None, {})) == StartSeed("demo-0")
    assert membership_unknown(THREE, observed([rt(0, STARTING)], None, {})) == Wait(
        "waiting for members to answer"
    )
    assert membership_unknown(THREE, healthy(1)) is None


def test_restart_brings_back_an_exited_member_and_replaces_a_crash_loop():
    runtime, members, health = cluster(3)
    runtime[2] = rt(2, EXITED)
    step = restart_stopped(THREE, observed(runtime, members, health))
    assert isinstance(step, StartMember) and step.name == "demo-2"
    runtime[2] = rt(2, EXITED, failures=3)
    del health["demo-2"]
    assert isinstance(restart_stopped(THREE, observed(runtime, members, health)), RemoveMember)
    assert restart_stopped(THREE, healthy(3)) is None


def test_quorum_guard_waits_without_a_healthy_majority():
    runtime, members, health = cluster(3)
    del health["demo-1"], health["demo-2"]
    assert hold_without_quorum(THREE, observed(runtime, members, health)) == Wait(
        "quorum lost: 1 of 3 voting members healthy"
    )
    assert hold_without_quorum(THREE, healthy(3)) is None


def test_data_loss_removes_a_member_whose_data_is_gone():
    runtime, members, health = cluster(3)
    runtime[1] = rt(1, EXITED, has_data=False)
    step = replace_lost_data(THREE, observed(runtime, members, health))
    assert step == RemoveMember(1001, "demo-1", reason="its data is gone")
    assert replace_lost_data(THREE, healthy(3)) is None


def test_data_loss_leaves_a_starting_learner_alone_though_no_data_is_listed_yet():
    runtime, members, health = cluster(3)
    runtime[2] = rt(2, STARTING, has_data=False)  # listed just before etcd made its directory
    members[2] = attrs.evolve(members[2], is_learner=True)
    assert replace_lost_data(THREE, observed(runtime, members, health)) is None


def test_leftovers_deletes_runtime_members_etcd_does_not_know():
    runtime, members, health = cluster(3)
    runtime.append(rt(5, ABSENT, has_data=False))
    step = delete_leftovers(THREE, observed(runtime, members, health))
    assert step == DeleteRuntimeMember("demo-5", reason="not a member of etcd")
    assert delete_leftovers(THREE, healthy(3)) is None


def test_leftovers_leave_a_member_whose_deletion_is_under_way_alone():
    runtime, members, health = cluster(3)
    runtime.append(attrs.evolve(rt(5, EXITED), deleting=True))  # a pod in its grace period
    assert delete_leftovers(THREE, observed(runtime, members, health)) is None


def test_learners_start_then_promote_the_learner_in_flight():
    runtime, members, health = cluster(1)
    runtime.append(rt(1, ABSENT, has_data=False))
    members.append(em(1, learner=True, started=False))
    assert isinstance(finish_learner(THREE, observed(runtime, members, health)), StartMember)
    runtime[1] = rt(1)
    members[1] = em(1, learner=True)
    health["demo-1"] = hl(1, learner=True)
    assert finish_learner(THREE, observed(runtime, members, health)) == PromoteLearner("demo-1", 1001)
    assert finish_learner(THREE, healthy(3)) is None


def test_size_adds_one_learner_or_moves_the_leader_before_removing_it():
    assert match_size(ClusterSpec(size=5), healthy(3)) == AddLearner("demo-3")
    runtime, members, health = cluster(3, leader=0)
    runtime[0] = rt(0, STARTING)  # unhealthy itself, so the first to go, but still leading
    del health["demo-0"]
    step = match_size(ClusterSpec(size=2), observed(runtime, members, health))
    assert step == MoveLeader("demo-1", 1001, reason="demo-0 is leaving")
    # Healthy members: the newest follower goes, never the leader.
    assert match_size(ClusterSpec(size=2), healthy(3, leader=2)) == RemoveMember(
        1001, "demo-1", reason="size is 2"
    )
    assert match_size(THREE, healthy(3)) is None


def test_the_first_planner_that_answers_wins():
    calls = []

    def first(spec, facts):
        calls.append("first")
        return Wait("first says wait")

    def second(spec, facts):
        calls.append("second")
        return AddLearner("never")

    assert plan(THREE, healthy(3), [first, second]) == Wait("first says wait")
    assert calls == ["first"]


def silent(seconds, *, restarted=False, n=3, name="demo-1"):
    runtime, members, health = cluster(n)
    health[name] = None
    facts = observed(runtime, members, health)
    return attrs.evolve(
        facts, silent_for={name: seconds}, restarted_silent=frozenset({name} if restarted else ())
    )


FAST_HEAL = ClusterSpec(size=3, health=HealthSpec(unresponsive_after="10s"))


def test_a_silent_running_member_is_restarted_after_unresponsive_after_then_replaced():
    assert heal_unresponsive(FAST_HEAL, silent(9.5)) is None
    step = heal_unresponsive(FAST_HEAL, silent(10.0))
    assert isinstance(step, RestartMember) and step.name == "demo-1"
    assert step.reason == "answered no probe for 10s (unresponsiveAfter 10s)"
    assert ("demo-1", "http://127.0.0.1:20001") in step.initial_cluster
    replaced = heal_unresponsive(FAST_HEAL, silent(12.0, restarted=True))
    assert isinstance(replaced, RemoveMember) and replaced.member_id == 1001
    # Without a healthy quorum to spare, it is restarted again rather than removed.
    two_silent = attrs.evolve(
        silent(12.0, restarted=True), health={"demo-0": hl(0), "demo-1": None, "demo-2": None}
    )
    assert isinstance(heal_unresponsive(FAST_HEAL, two_silent), RestartMember)


def test_a_member_that_answers_is_never_judged_silent():
    facts = attrs.evolve(healthy(3), silent_for={"demo-1": 99.0})
    assert heal_unresponsive(FAST_HEAL, facts) is None


def test_a_crash_loop_backs_off_and_says_why():
    runtime, members, health = cluster(3)
    runtime[2] = attrs.evolve(rt(2, EXITED, failures=2), exit_code=1, last_error="etcd: bad flag --foo")
    del health["demo-2"]
    facts = attrs.evolve(observed(runtime, members, health), stopped_for={"demo-2": 0.4})
    assert restart_stopped(THREE, facts) == Wait(
        "demo-2 exited with code 1 (etcd: bad flag --foo), 2 times in a row; restarting in 1s"
    )
    later = attrs.evolve(facts, stopped_for={"demo-2": 1.0})
    step = restart_stopped(THREE, later)
    assert isinstance(step, StartMember)
    assert step.reason == "exited with code 1 (etcd: bad flag --foo), 2 times in a row; restart with its data"
    assert [restart_delay(n) for n in range(1, 9)] == [0, 1, 2, 4, 8, 16, 32, 60]


def test_a_seed_that_keeps_failing_is_not_restarted_in_a_tight_loop():
    seed = attrs.evolve(
        rt(0, EXITED, has_data=False, failures=5), exit_code=1, last_error="open tls: no such file"
    )
    facts = attrs.evolve(observed([seed], None, {}), stopped_for={"demo-0": 2.0})
    wait = membership_unknown(THREE, facts)
    assert (
        isinstance(wait, Wait)
        and "open tls: no such file" in wait.reason
        and "restarting in 6s" in wait.reason
    )
    assert membership_unknown(THREE, attrs.evolve(facts, stopped_for={"demo-0": 8.0})) == StartSeed("demo-0")


def test_a_member_that_answers_counts_as_healthy_while_its_runtime_still_says_starting():
    runtime, members, health = cluster(3)
    runtime[2] = rt(2, STARTING)  # a pod whose status trails its container
    assert observed(runtime, members, health).is_healthy("demo-2")
    del health["demo-2"]
    assert not observed(runtime, members, health).is_healthy("demo-2")

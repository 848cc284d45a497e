"""The rolling restart: order (followers, then the leader after MoveLeader), one at a time,
and never while a member is unhealthy, lagging or membership is changing."""

import attrs
import pytest

from actors.actions import AddLearner, EnableDowngrade, MoveLeader, RollMember, StartMember, Wait
from actors.assess import assess, upgrading_condition
from actors.model import ClusterSpec, MemberConfig
from actors.plan import plan
from tests.unit.facts import EXITED, RUNNING, STARTING, cluster, em, hl, observed, rt

OLD, NEW = "fingerprint-of-3.5.35", "fingerprint-of-3.6.16"
SPEC = ClusterSpec(size=3, version="3.6.16")


def rolling(runtime, members, health, configs, *, unavailable="", spec=SPEC):
    """plan() for runtime members started with `configs` (name -> fingerprint), NEW wanted."""
    runtime = [attrs.evolve(r, config=configs.get(r.name, OLD)) for r in runtime]
    seen = attrs.evolve(observed(runtime, members, health), desired=MemberConfig(NEW, unavailable))
    return plan(spec, seen), seen


def test_followers_roll_first_newest_first_then_leadership_moves_then_the_old_leader_rolls():
    runtime, members, health = cluster(3, leader=0)
    step, _ = rolling(runtime, members, health, {})
    assert isinstance(step, RollMember) and step.name == "demo-2" and step.version == "3.6.16"
    assert dict(step.initial_cluster)["demo-2"] == runtime[2].urls.peer_url
    step, _ = rolling(runtime, members, health, {"demo-2": NEW})
    assert isinstance(step, RollMember) and step.name == "demo-1"
    # Only the leader is left: leadership goes to a member already on the new configuration.
    step, _ = rolling(runtime, members, health, {"demo-1": NEW, "demo-2": NEW})
    assert isinstance(step, MoveLeader) and step.to_name == "demo-1"
    moved = {n: hl(int(n[-1]), leader=1) for n in health}
    step, _ = rolling(runtime, members, moved, {"demo-1": NEW, "demo-2": NEW})
    assert isinstance(step, RollMember) and step.name == "demo-0"
    step, seen = rolling(runtime, members, moved, dict.fromkeys(health, NEW))
    assert step is None
    assert upgrading_condition(SPEC, seen).reason == "UpToDate"


def test_nothing_rolls_while_a_member_is_unhealthy_or_lagging():
    runtime, members, health = cluster(3)
    health["demo-1"] = None  # running, not answering
    step, seen = rolling(runtime, members, health, {"demo-2": NEW})
    assert step == Wait("rolling restart paused: demo-1 not healthy")
    assert upgrading_condition(SPEC, seen).status == "True"
    runtime, members, health = cluster(3)
    health = {n: hl(int(n[-1]), index=5000) for n in health}
    health["demo-2"] = hl(2, index=5000, applied=1000)  # just restarted, replaying its log
    step, _ = rolling(runtime, members, health, {"demo-2": NEW})
    assert step == Wait("rolling restart waits for demo-2 to catch up")


def test_the_next_member_waits_until_the_restarted_one_is_reported_ready_not_only_answering():
    # demo-2 restarted and answers etcd's health, but its pod's readiness probe has not passed
    # yet: Services and the disruption budget count it down, so demo-1 must not go now.
    runtime, members, health = cluster(3)
    runtime[2] = attrs.evolve(runtime[2], state=STARTING)
    step, _ = rolling(runtime, members, health, {"demo-2": NEW})
    assert step == Wait("rolling restart waits for demo-2 to be reported ready")
    runtime[2] = attrs.evolve(runtime[2], state=RUNNING)
    step, _ = rolling(runtime, members, health, {"demo-2": NEW})
    assert isinstance(step, RollMember) and step.name == "demo-1"


def test_never_during_a_membership_change():
    runtime, members, health = cluster(3)
    runtime.append(rt(3))
    members.append(em(3, learner=True))
    health["demo-3"] = hl(3, learner=True, applied=10)
    step, _ = rolling(runtime, members, health, {"demo-3": NEW}, spec=attrs.evolve(SPEC, size=4))
    assert step == Wait("learner demo-3 catching up")
    step, _ = rolling(*cluster(3), {}, spec=attrs.evolve(SPEC, size=5))
    assert step == AddLearner("demo-3")  # growth first, the restarts after it


def test_a_version_that_cannot_run_here_rolls_nothing_and_says_how_to_get_it():
    step, seen = rolling(*cluster(3), {}, unavailable="etcd 3.6.16 is not installed: make etcd-versions")
    assert step is None
    condition = upgrading_condition(SPEC, seen)
    assert (condition.status, condition.reason) == ("False", "VersionUnavailable")
    assert "make etcd-versions" in condition.message


def test_a_member_that_fails_on_the_new_version_stops_the_rollout_and_is_not_replaced():
    runtime, members, health = cluster(3)
    runtime[2] = attrs.evolve(rt(2, EXITED, failures=5), last_error="etcd: unknown flag")
    health["demo-2"] = None
    step, seen = rolling(runtime, members, health, {"demo-2": NEW})
    # Restarted (with backoff), never removed as corrupt, and the others are left as they are.
    assert isinstance(step, (StartMember, Wait))
    condition = upgrading_condition(SPEC, seen)
    assert (condition.status, condition.reason) == ("False", "MemberFailedToStart")
    assert "demo-2" in condition.message and "2 of 3 members left as they were" in condition.message


def test_a_one_member_cluster_restarts_its_only_member():
    step, _ = rolling(*cluster(1), {}, spec=attrs.evolve(SPEC, size=1))
    assert isinstance(step, RollMember) and step.name == "demo-0"


@pytest.mark.parametrize(("newer", "older"), [("3.6.16", "3.5.35"), ("3.7.3", "3.6.16")])
def test_going_back_a_minor_enables_etcds_downgrade_first_then_rolls_members_back(newer, older):
    spec = attrs.evolve(SPEC, version=older)
    target = older.rsplit(".", 1)[0] + ".0"
    runtime, members, health = cluster(3)
    on_newer = {n: attrs.evolve(h, version=newer) for n, h in health.items()}
    step, _ = rolling(runtime, members, on_newer, {}, spec=spec)
    assert step == EnableDowngrade(target)
    enabled = {n: attrs.evolve(h, downgrade_target=target) for n, h in on_newer.items()}
    step, _ = rolling(runtime, members, enabled, {}, spec=spec)
    assert step == Wait(f"waiting for etcd to take the cluster version down to {target}")
    enabled = {n: attrs.evolve(h, storage_version=target) for n, h in enabled.items()}
    step, _ = rolling(runtime, members, enabled, {}, spec=spec)
    assert isinstance(step, RollMember) and step.name == "demo-2"
    # Once a member runs the older minor the cluster version is that minor: no second enable,
    # the rollback goes on.
    enabled["demo-2"] = attrs.evolve(health["demo-2"], version=older)
    step, _ = rolling(runtime, members, enabled, {"demo-2": NEW}, spec=spec)
    assert isinstance(step, RollMember) and step.name == "demo-1"
    # An upgrade (or a patch change) needs no downgrade.
    on_older = {n: attrs.evolve(h, version=older) for n, h in health.items()}
    step, _ = rolling(runtime, members, on_older, {}, spec=attrs.evolve(spec, version=newer))
    assert isinstance(step, RollMember)


def test_a_member_silent_on_the_new_configuration_is_restarted_but_never_replaced():
    runtime, members, health = cluster(3)
    health["demo-2"] = None  # runs, answers nothing, already restarted once for it
    runtime = [attrs.evolve(r, config=NEW if r.name == "demo-2" else OLD) for r in runtime]
    seen = attrs.evolve(
        observed(runtime, members, health),
        desired=MemberConfig(NEW),
        silent_for={"demo-2": 120.0},
        restarted_silent=frozenset({"demo-2"}),
    )
    step = plan(SPEC, seen)
    assert type(step).__name__ == "RestartMember" and step.name == "demo-2"
    assert upgrading_condition(SPEC, seen).reason == "MemberFailedToStart"


def test_the_cluster_version_is_etcds_or_else_the_lowest_members_minor_or_the_downgrade():
    runtime, members, health = cluster(3)
    health = {n: attrs.evolve(h, version="3.6.16") for n, h in health.items()}
    health["demo-1"] = attrs.evolve(health["demo-1"], version="3.5.35")

    def version(health):
        seen = observed(runtime, members, health)
        return assess(SPEC, seen, previous=None, generation=1, step=None, now=0.0).version

    assert version(health) == "3.5.0"  # mid-upgrade: 3.6 only once every member runs it
    on_36 = {n: attrs.evolve(h, version="3.6.16") for n, h in health.items()}
    assert version(on_36) == "3.6.0"
    enabled = {n: attrs.evolve(h, downgrade_target="3.5.0") for n, h in on_36.items()}
    assert version(enabled) == "3.6.0"  # enabled, not yet in effect
    lowered = {n: attrs.evolve(h, storage_version="3.5.0") for n, h in enabled.items()}
    assert version(lowered) == "3.5.0"
    assert version({**health, "demo-2": None}) == ""  # a member not answering: unknown
    # What etcd reports (the leader's /version) wins: it raises the version seconds after the
    # last member runs the new minor, and lowers it for a downgrade before any member goes back.
    reported = {**on_36, "demo-0": attrs.evolve(on_36["demo-0"], cluster_version="3.5.0")}
    assert version(reported) == "3.5.0"
    # A former leader's report, asked before leadership moved, gives way to the leader's.
    moved = {**reported, "demo-1": attrs.evolve(on_36["demo-1"], cluster_version="3.6.0")}
    assert version(moved) == "3.5.0"


def test_each_step_is_decided_on_answers_asked_after_the_previous_one():
    # A flag-only rollout (the version stays): only the fingerprint tells old from new.
    spec = attrs.evolve(SPEC, version="3.5.35")
    runtime, members, health = cluster(3, leader=0)
    health = {n: attrs.evolve(h, version="3.5.35") for n, h in health.items()}

    def after_step(configs, health, answered_before):
        runtime_now = [attrs.evolve(r, config=configs.get(r.name, OLD)) for r in runtime]
        seen = attrs.evolve(
            observed(runtime_now, members, health),
            desired=MemberConfig(NEW),
            answered_before_step=frozenset(answered_before),
        )
        return plan(spec, seen)

    # demo-2 was just restarted; its latest answer came from the old process, still "healthy".
    step = after_step({"demo-2": NEW}, health, {"demo-2"})
    assert step == Wait("rolling restart waits for demo-2 to answer since the last step")
    step = after_step({"demo-2": NEW}, health, set())
    assert isinstance(step, RollMember) and step.name == "demo-1"

    # Leadership was just moved; the answers asked before the move still name the old leader:
    # moving it again (a no-op etcd accepts) would only add LeaderMoved Events.
    both = {"demo-1": NEW, "demo-2": NEW}
    step = after_step(both, health, set(health))
    assert step == Wait("rolling restart waits for demo-0, demo-1, demo-2 to answer since the last step")
    moved = {n: attrs.evolve(h, leader_id=1001) for n, h in health.items()}
    step = after_step(both, moved, set())
    assert isinstance(step, RollMember) and step.name == "demo-0"


def test_no_step_while_the_members_name_no_leader():
    runtime, members, health = cluster(3)
    electing = {n: attrs.evolve(h, leader_id=0) for n, h in health.items()}
    step, _ = rolling(runtime, members, electing, {"demo-2": NEW})
    assert step == Wait("rolling restart waits for the members to agree on a leader")

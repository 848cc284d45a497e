"""What `plan(spec, observed)` promises about any single step, as checks on one (observed, step)
pair: shared by the property tests over random worlds (test_plan_properties.py) and by the
stateful run to a fixed point (test_plan_fixed_point.py). Each check states its promise as its
docstring and fails with the step and the facts that break it."""

from __future__ import annotations

from actors.actions import (
    AddLearner,
    MoveLeader,
    PromoteLearner,
    RemoveMember,
    RestartMember,
    RestoreSeed,
    RollMember,
    StartMember,
    StartSeed,
    Step,
    Wait,
)
from actors.maintenance.steps import DefragMember
from actors.model import ClusterSpec, EtcdMember
from actors.observed import Observed, quorum
from actors.recovery import RecoverFromBackup, RecoverFromSurvivor

# The steps that take a healthy voter out of service for a moment (stop and start it on its
# data, or block it while its database file is rewritten).
OUT_FOR_A_MOMENT = (RollMember, DefragMember)


def by_id(observed: Observed, member_id: int) -> EtcdMember | None:
    return next((m for m in observed.members if m.id == member_id), None)


def by_name(observed: Observed, name: str) -> EtcdMember | None:
    return next((m for m in observed.members if observed.name_of(m) == name), None)


def facts(observed: Observed, step: Step | None) -> str:
    voters = [(m.name, m.id) for m in observed.voters()]
    healthy = [m.name for m in observed.healthy_voters()]
    learners = [m.id for m in observed.learners()]
    return f"step {step!r}\nvoters {voters}, healthy {healthy}, learners {learners}"


def no_step_costs_a_healthy_quorum(spec: ClusterSpec, observed: Observed, step: Step | None) -> None:
    """When a quorum of voters is healthy, no step costs it: a voter is removed only when the
    healthy voters left are a quorum of the smaller membership; (re)starts and restarts only ever
    touch a member that does not answer; and a healthy voter is taken out for a moment (a rolling
    restart, a defragmentation) only when the whole cluster is healthy at its size with no
    learner, so that from three voters on the others stay a quorum."""
    if not observed.has_quorum():
        return
    healthy = observed.healthy_voters()
    if isinstance(step, RemoveMember):
        victim = by_id(observed, step.member_id)
        if victim is not None and not victim.is_learner:
            left = [m for m in healthy if m.id != victim.id]
            assert len(left) >= quorum(len(observed.voters()) - 1), facts(observed, step)
    if isinstance(step, StartMember | RestartMember):
        assert not observed.is_healthy(step.name), facts(observed, step)
    if isinstance(step, OUT_FOR_A_MOMENT):
        voters = observed.voters()
        assert all(observed.healthy(m) for m in observed.members), facts(observed, step)
        assert not observed.learners() and len(voters) == spec.size, facts(observed, step)
        if len(voters) >= 3:
            assert len(healthy) - 1 >= quorum(len(voters)), facts(observed, step)


def never_removes_the_last_healthy_voter(spec: ClusterSpec, observed: Observed, step: Step | None) -> None:
    """No step removes a healthy voter unless another healthy voter stays (in any world)."""
    if isinstance(step, RemoveMember):
        victim = by_id(observed, step.member_id)
        if victim is not None and not victim.is_learner and observed.healthy(victim):
            assert [m for m in observed.healthy_voters() if m.id != victim.id], facts(observed, step)


def one_membership_change_at_a_time(spec: ClusterSpec, observed: Observed, step: Step | None) -> None:
    """A learner is added only when etcd lists none and the voters are fewer than spec.size,
    with a healthy quorum; a learner is promoted only when it answers, the cluster has a healthy
    quorum and the voters are still fewer than spec.size."""
    if isinstance(step, AddLearner):
        assert observed.etcd_members is not None and not observed.learners(), facts(observed, step)
        assert len(observed.voters()) < spec.size and observed.has_quorum(), facts(observed, step)
    if isinstance(step, PromoteLearner):
        learner = by_id(observed, step.member_id)
        assert learner is not None and learner.is_learner and observed.healthy(learner), facts(observed, step)
        assert observed.has_quorum() and len(observed.voters()) < spec.size, facts(observed, step)


def leadership_moves_to_a_healthy_voter(spec: ClusterSpec, observed: Observed, step: Step | None) -> None:
    """Leadership is only ever handed to a healthy voter."""
    if isinstance(step, MoveLeader):
        target = by_id(observed, step.to_id)
        assert target is not None and not target.is_learner and observed.healthy(target), facts(
            observed, step
        )


def without_quorum_only_repair(spec: ClusterSpec, observed: Observed, step: Step | None) -> None:
    """Without a healthy quorum of the voters etcd lists, membership does not change: the plan
    waits, starts or restarts members on their data, or (Automatic mode only) rebuilds from a
    survivor. With etcd's membership unknown (no member answers) it bootstraps, restarts members
    on their data, restores a cluster whose data is all lost from a backup, or waits; it never
    calls that converged."""
    if observed.etcd_members is None:
        bootstrap = Wait | StartSeed | RestoreSeed | StartMember | RecoverFromBackup
        assert isinstance(step, bootstrap), facts(observed, step)
        return
    if observed.has_quorum():
        return
    assert isinstance(step, Wait | StartMember | RestartMember | RecoverFromSurvivor), facts(observed, step)


def converged_means_converged(spec: ClusterSpec, observed: Observed, step: Step | None) -> None:
    """No step at all (converged) only with a healthy quorum, exactly spec.size voters and no
    learner."""
    if step is None:
        assert observed.has_quorum(), facts(observed, step)
        assert len(observed.voters()) == spec.size and not observed.learners(), facts(observed, step)


PROMISES = (
    no_step_costs_a_healthy_quorum,
    never_removes_the_last_healthy_voter,
    one_membership_change_at_a_time,
    leadership_moves_to_a_healthy_voter,
    without_quorum_only_repair,
    converged_means_converged,
)


def check_every_promise(spec: ClusterSpec, observed: Observed, step: Step | None) -> None:
    for promise in PROMISES:
        promise(spec, observed, step)

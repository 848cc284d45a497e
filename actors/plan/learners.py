"""The learner in flight: start it, promote it once caught up, or drop it when the size went
down meanwhile. One change at a time, so nothing after this planner runs until it is done."""

from __future__ import annotations

from actors.actions import PromoteLearner, RemoveMember, StartMember, Step, Wait
from actors.model import ClusterSpec, ProcessState, exit_story
from actors.observed import Observed

# etcd refuses to promote a learner whose log lags too far; promote only once it has applied
# this share of the leader's log, so promotion does not bounce off that check.
LEARNER_CAUGHT_UP_RATIO = 0.9


def finish_learner(spec: ClusterSpec, observed: Observed) -> Step | None:
    for m in observed.learners():
        r = observed.runtime_for(m)
        if r is None:
            continue  # the data-loss planner removes a learner without a runtime member
        if len(observed.own_voters()) >= spec.size:
            return RemoveMember(m.id, r.name, reason=f"size is {spec.size}: learner no longer needed")
        if r.state in (ProcessState.ABSENT, ProcessState.EXITED):
            # A learner whose first start failed says why: what its pod or process left is gone
            # once it is started again.
            story = "added" if r.state is ProcessState.ABSENT else exit_story(r)
            return StartMember(r.name, observed.initial_cluster(r.name), reason=f"learner {story}; start it")
        if r.unschedulable:  # it cannot catch up before it runs: say why it does not
            return Wait(f"learner {r.name}: pod cannot be scheduled: {r.unschedulable}")
        if caught_up(observed, r.name):
            return PromoteLearner(r.name, m.id)
        return Wait(f"learner {r.name} catching up")
    return None


def caught_up(observed: Observed, learner_name: str) -> bool:
    own = observed.health.get(learner_name)
    if own is None or not observed.is_healthy(learner_name):
        return False
    return own.raft_applied_index >= observed.highest_raft_index() * LEARNER_CAUGHT_UP_RATIO

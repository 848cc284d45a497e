"""Towards spec.size: add one learner, or remove one voter, at a time."""

from __future__ import annotations

from actors.actions import AddLearner, MoveLeader, RemoveMember, Step, Wait
from actors.model import ClusterSpec, EtcdMember
from actors.observed import Observed
from actors.plan.common import next_member_name, ordinal_of
from actors.plan.restart import restart_delay


def match_size(spec: ClusterSpec, observed: Observed) -> Step | None:
    voters = observed.own_voters()  # an adopted cluster's old members are not its size
    if len(voters) < spec.size:
        # The quorum guard ran before this planner: the voters that answer are a quorum. A
        # learner does not vote, and it is promoted only once it answers and has caught up, so
        # a member that is down or hung (healed by its own planner meanwhile) never blocks growth.
        return vanished_backoff(observed) or AddLearner(next_member_name(observed))
    if len(voters) > spec.size:
        return _shrink(spec, observed, voters)
    return None


def _shrink(spec: ClusterSpec, observed: Observed, voters: list[EtcdMember]) -> Step:
    victim = scale_down_victim(observed, voters)
    if victim.id == observed.leader_id():
        target = next((m for m in observed.healthy_voters() if m.id != victim.id), None)
        if target is None:
            return Wait("no healthy member to move leadership to")
        return MoveLeader(target.name, target.id, reason=f"{victim.name} is leaving")
    if not observed.can_remove(victim):
        return Wait(f"removing {victim.name} now would cost quorum")
    return RemoveMember(victim.id, victim.name, reason=f"size is {spec.size}")


def scale_down_victim(observed: Observed, voters: list[EtcdMember]) -> EtcdMember:
    """Unhealthy members go first (removing them costs nothing), then followers, newest first;
    the leader only when nothing else is left."""
    leader = observed.leader_id()

    def keep_score(m: EtcdMember) -> tuple[bool, bool, int]:
        return (observed.healthy(m), m.id == leader, -ordinal_of(observed, m))

    return min(voters, key=keep_score)


def vanished_backoff(observed: Observed) -> Wait | None:
    """A Wait while members keep vanishing from etcd's membership right after being added
    (something outside removes them): the next add backs off as a crash loop's restart does,
    and the status says which member vanished and how often."""
    v = observed.vanished
    if v is None:
        return None
    delay = restart_delay(v.times)
    if v.ago >= delay:
        return None
    return Wait(
        f"{v.name} vanished from etcd's membership {v.times} times in a row (removed by something"
        f" else?); adding a member again in {delay - v.ago:.0f}s"
    )

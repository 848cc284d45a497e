"""Members taken one at a time (the rolling restarts of `rollout.py`, the storage replacements
of `storage.py`): when the next one may go, and which one it is.

The gate: every member healthy and reported ready by its runtime (a pod's Ready), each
answered since the last step (an earlier answer may come from a restarted member's old process,
or name a leader since moved), none lagging behind the leader's log. The order: followers first,
the highest ordinal first; the leader last, after leadership moved to a member already done, so
the cluster elects at most once. What is done to the member, and what happens when the leader
has nobody to hand over to, is each planner's own.
Pure.
"""

from __future__ import annotations

from collections.abc import Container

import attrs

from actors.actions import Wait
from actors.model import EtcdMember, ProcessState
from actors.observed import Observed
from actors.plan.common import ordinal_of

# A member counts as caught up when it has applied the leader's log up to this many entries;
# under load the indices move between two probes, so equality would never be seen.
CATCH_UP_SLACK = 1000


def one_at_a_time(observed: Observed, what: str) -> Wait | None:
    """Why the next member of a rollout (`what`: "rolling restart") must wait, or None when it
    may go: every member healthy, each answered since the last step, none lagging behind."""
    unhealthy = [observed.display_name(m) for m in observed.members if not observed.healthy(m)]
    if unhealthy:
        return Wait(f"{what} paused: {', '.join(sorted(unhealthy))} not healthy")
    starting = sorted(r.name for r in observed.running() if r.state is ProcessState.STARTING)
    if starting:
        # Healthy to etcd, not yet to its runtime: on Kubernetes a pod whose readiness probe
        # has not passed yet. The Services, the disruption budget and the cluster's users
        # count it down, so taking the next member now would show two down at once.
        return Wait(f"{what} waits for {', '.join(starting)} to be reported ready")
    unconfirmed = sorted(observed.answered_before_step & set(observed.health))
    if unconfirmed:
        return Wait(f"{what} waits for {', '.join(unconfirmed)} to answer since the last step")
    lagging = _lagging(observed)
    if lagging:
        return Wait(f"{what} waits for {', '.join(lagging)} to catch up")
    return None


@attrs.frozen
class Turn:
    """The member whose turn it is; when it leads, `successor` is a healthy voter already done
    to hand leadership to first (None: there is none, as in a one-member cluster)."""

    member: EtcdMember
    leads: bool
    successor: EtcdMember | None = None


def next_turn(observed: Observed, pending: Container[str], what: str) -> Turn | Wait | None:
    """Whose turn it is among the voters named in `pending`: a follower while one is left (the
    highest ordinal first), then the leader. A Wait while the members agree on no leader; None
    when etcd lists none of them (leftovers: not ours to take)."""
    leader = observed.leader_id()
    if leader is None:
        return Wait(f"{what} waits for the members to agree on a leader")
    voters = [m for m in observed.voters() if observed.name_of(m) in pending]
    if not voters:
        return None
    member = min(voters, key=lambda m: (m.id == leader, -ordinal_of(observed, m)))
    if member.id != leader:
        return Turn(member, leads=False)
    done = (m for m in observed.healthy_voters() if observed.name_of(m) not in pending)
    return Turn(member, leads=True, successor=next(done, None))


def _lagging(observed: Observed) -> list[str]:
    answers = {n: h for n, h in observed.health.items() if h is not None}
    head = max((h.raft_index for h in answers.values()), default=0)
    return sorted(n for n, h in answers.items() if h.raft_applied_index + CATCH_UP_SLACK < head)

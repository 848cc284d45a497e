"""Rolling restarts: members started with another configuration than the spec's (another etcd
version or image, a changed restart-only flag) are restarted on their own data, one at a time.

Followers go first, the leader last after leadership moved to a member already restarted, so
the cluster elects at most once. Each restart waits until every member is healthy and caught up
again, and none starts while a member is unhealthy or membership is changing: a restart costs
one voter for a few seconds, which only a whole cluster can spare. Every step is decided on
answers asked after the previous step ended: an earlier answer may come from a restarted
member's old process (which stays "healthy" for seconds) or name a leader since moved (which
would move leadership again, and again). A member that does not come
up with the new configuration therefore stops the rollout where it is (assess says why under
the Upgrading condition); the members not yet restarted keep running what they ran. The gate
and the order are those of the storage replacements too (`turns.py`).

Going back one minor (3.7 -> 3.6, 3.6 -> 3.5: etcd's downgrade API exists from 3.6 on) first
asks etcd to lower the cluster version (its downgrade API: validate, then enable); the members
then go back one at a
time in the same order, and etcd ends the downgrade once all of them run the older minor.

Runs after the size planner: growth or shrinkage in flight finishes first.
"""

from __future__ import annotations

from actors.actions import EnableDowngrade, MoveLeader, RollMember, Step, Wait
from actors.model import ClusterSpec, EtcdMember
from actors.observed import Observed
from actors.plan.turns import Turn, next_turn, one_at_a_time


def roll_outdated(spec: ClusterSpec, observed: Observed) -> Step | None:
    desired = observed.desired
    outdated = {r.name for r in observed.to_roll()}
    if desired is None or not outdated or desired.unavailable:
        return None  # nothing to do, or nothing to do it with (Degraded says what is missing)
    if observed.learners() or len(observed.own_voters()) != spec.size:
        return None  # a membership change is in flight: the planners before this one finish it
    gate = one_at_a_time(observed, "rolling restart")
    if gate is not None:
        return gate
    downgrade = _downgrade_first(spec, observed)
    if downgrade is not None:
        return downgrade
    turn = next_turn(observed, outdated, "rolling restart")
    if not isinstance(turn, Turn):
        return turn  # no leader yet, or only members etcd does not list (leftovers) differ
    successor = turn.successor
    if not turn.leads or successor is None:  # a follower, or a one-member cluster's leader
        return _roll(observed, turn.member, spec)
    reason = f"{turn.member.name} leads and restarts last, for its new configuration"
    return MoveLeader(successor.name, successor.id, reason=reason)


def _roll(observed: Observed, member: EtcdMember, spec: ClusterSpec) -> RollMember:
    name = observed.name_of(member)
    configured = name not in {r.name for r in observed.outdated()}
    # Its configuration is current, so what differs is the trust material it started with: a CA
    # rotation step, or certificates renewed outside the supervisor (secretRef, cert-manager).
    why = "to take the cluster's new certificate material" if configured else ""
    return RollMember(name, spec.version, observed.initial_cluster(name), why=why)


def _downgrade_first(spec: ClusterSpec, observed: Observed) -> EnableDowngrade | Wait | None:
    """Going back a minor (3.7 -> 3.6, 3.6 -> 3.5): etcd must first lower the cluster version (its
    downgrade
    API), or members of the older minor refuse the data. Not needed once any member runs the
    target minor: the cluster version is that minor already (an upgrade undone half-way, or a
    downgrade under way)."""
    answers = [h for h in observed.health.values() if h is not None]
    running = [_minor(h.version) for h in answers if h.version]
    target = _minor(spec.version)
    if not running or min(running) <= target:
        return None
    cluster_version = f"{target[0]}.{target[1]}.0"
    if all(h.downgrade_target == cluster_version for h in answers):
        # Enabled. The leader lowers the cluster version, then each member the version its
        # data is kept in, within seconds; a member of the older minor started before then
        # would find a cluster newer than itself.
        if all(h.storage_version == cluster_version for h in answers):
            return None  # the members go back one at a time
        return Wait(f"waiting for etcd to take the cluster version down to {cluster_version}")
    return EnableDowngrade(cluster_version)


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)

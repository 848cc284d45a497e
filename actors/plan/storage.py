"""Storage changes (spec.storage.size, spec.storage.storageClassName): each member whose volume
differs from the spec is replaced by a new member on a new volume, one at a time.

A member's volume cannot change class, and not every class can grow, so the member goes: it is
removed from etcd (and its pod and claim deleted), then the size planner adds a new learner,
whose claim is made from the spec in force, and promotes it once caught up. Only then is the
next one taken. Followers go first, the leader last, after leadership moved to a member already
on the new storage (the rollout's order, `turns.py`). A removal waits until every member is
healthy, answered since the last step and caught up (the rollout's gate), and is made only with
a healthy quorum left, so a cluster of three never has fewer than two healthy voters. A
one-member cluster is not touched: removing its member would lose its only copy (scale it to
three first).

Sizes are compared as quantities (10Gi equals 10240Mi); a class is compared only when the spec
names one (a claim without one gets the cluster's default class). Where volumes are unknown
(the local runtime has none) nothing is replaced. No in-place expansion: a larger size is a
new volume too, whatever the class allows.

Runs after the rolling restarts: a configuration rollout in flight finishes first. Pure.
"""

from __future__ import annotations

from actors.actions import MoveLeader, RemoveMember, Step, Wait
from actors.model import ClusterSpec, StorageSpec, quantity_bytes
from actors.observed import Observed
from actors.plan.turns import Turn, next_turn, one_at_a_time


def differs(volume: StorageSpec, wanted: StorageSpec) -> bool:
    if wanted.storage_class_name and volume.storage_class_name != wanted.storage_class_name:
        return True
    try:
        return quantity_bytes(volume.size) != quantity_bytes(wanted.size)
    except ValueError:
        return False  # not a quantity we read: not ours to judge


def describe(volume: StorageSpec) -> str:
    return f"{volume.size} of class {volume.storage_class_name or '(default)'}"


def replace_storage(spec: ClusterSpec, observed: Observed) -> Step | None:
    stale = {
        r.name: r.volume for r in observed.runtime if r.volume is not None and differs(r.volume, spec.storage)
    }
    if not stale:
        return None
    if observed.learners() or len(observed.own_voters()) != spec.size:
        return None  # a membership change is in flight: the planners before this one finish it
    if spec.size < 2:
        return Wait(
            "storage change: a one-member cluster cannot be moved to a new volume (scale it up first)"
        )
    gate = one_at_a_time(observed, "storage change")
    if gate is not None:
        return gate
    turn = next_turn(observed, stale, "storage change")
    if not isinstance(turn, Turn):
        return turn  # no leader yet, or only members etcd does not list (leftovers) differ
    victim = turn.member
    name = observed.name_of(victim)
    if turn.leads:
        successor = turn.successor
        if successor is None:
            return Wait("storage change: no member on the new storage to move leadership to")
        reason = f"{name} leads and is replaced last, for its storage"
        return MoveLeader(successor.name, successor.id, reason=reason)
    if not observed.can_remove(victim):
        return Wait(f"storage change: removing {name} now would cost quorum")
    volume = stale[name]
    assert volume is not None
    why = f"its volume ({describe(volume)}) is not spec.storage ({describe(spec.storage)})"
    return RemoveMember(victim.id, name, reason=f"{why}: a new member on a new volume replaces it")

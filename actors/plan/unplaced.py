"""Members whose pod the scheduler cannot place are replaced by a new member on a new volume.

The usual cause is a volume bound to one node (local volumes, or a zone's disk) whose node is
drained, cordoned or gone: the member's pod, made again on its own claim, can run nowhere
else. Waiting for the node may take hours; a new member, whose new claim binds wherever the
scheduler places its pod, restores the cluster's redundancy in seconds. So after
`spec.health.unresponsiveAfter` without a place (a scheduler that places the pod meanwhile
ends the wait), the member is removed from etcd's membership, its pod and claim deleted, and
the size planner adds the new member. Only with a healthy quorum left after the removal: the
member's data is not needed, the quorum holds everything acknowledged.
"""

from __future__ import annotations

from actors.actions import RemoveMember, Step
from actors.model import ClusterSpec
from actors.observed import Observed


def replace_unplaced(spec: ClusterSpec, observed: Observed) -> Step | None:
    limit = spec.health.unresponsive_after_seconds
    for m in sorted(observed.members, key=lambda m: m.name):
        r = observed.runtime_for(m)
        if r is None or not r.unschedulable or r.deleting:
            continue
        waited = observed.unplaced_for.get(r.name, 0.0)
        if waited >= limit and observed.can_remove(m):
            reason = (
                f"its pod could not be scheduled for {waited:.0f}s ({r.unschedulable}): "
                "replaced by a new member on a new volume"
            )
            return RemoveMember(m.id, r.name, reason=reason)
    return None

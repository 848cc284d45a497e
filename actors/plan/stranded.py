"""Members stranded on a node that stopped answering are replaced by a new member elsewhere.

On Kubernetes a member on a lost node (powered off, kubelet dead, cut off) answers no probe;
after `spec.health.unresponsiveAfter` it is restarted (actors/plan/unresponsive.py), which asks
its pod to stop. A kubelet that answers confirms within seconds of the grace period; one that
does not leaves the pod terminating for as long as the node is away. A new member's pod given
to such a node before Kubernetes marked it NotReady never starts either. Either way the member
is stranded (RuntimeMember.stranded: supervisor/kube/pods.py says when) and is removed from
etcd's membership; only then is its pod deleted without waiting for the node
(supervisor/kube/runtime.py, delete_member), and the size planner adds a new member, whose new
claim binds on a node that answers.

This runs before restart_stopped: starting the member again on its own data would wait on the
same unconfirmed stop. Only with a healthy quorum left after the removal; without one, nothing
changes here (a cluster without quorum needs its members back, not fewer of them).
"""

from __future__ import annotations

from actors.actions import RemoveMember, Step
from actors.model import ClusterSpec
from actors.observed import Observed


def replace_stranded(spec: ClusterSpec, observed: Observed) -> Step | None:
    for m in sorted(observed.members, key=lambda m: m.name):
        r = observed.runtime_for(m)
        if r is None or not r.stranded or observed.is_healthy(r.name):
            continue
        if observed.has_quorum() and observed.can_remove(m):
            reason = "its node does not act on its pod (node down or cut off): replaced on another node"
            return RemoveMember(m.id, r.name, reason=reason)
    return None

"""Pure decisions: the single next step for one cluster.

`plan(spec, observed)` asks an ordered list of small planners, each
`(spec, observed) -> Action | Wait | None`; the first that answers wins. Membership changes
happen one at a time: the caller executes the step, re-observes and asks again. No step may
cost quorum: members join as learners and are promoted once caught up, unhealthy members go
before healthy ones, and leadership moves away from a member before it is removed.

The order is the policy. A hibernated cluster (spec.hibernate) takes no other step. A quorum
lost for good is rebuilt first (only in Automatic mode, and only once the voters that may
return cannot form a quorum). A cluster to adopt whose etcd auth is not known to be off is
never joined (decided before its refused member list reads as silence). Bring back what is
down or silent before anything else (that is also how a cluster that lost quorum returns);
with quorum lost, change nothing; then repair (lost data, members no node can take,
leftovers), finish the change in flight (a learner), and only then work towards the size (an
adopted cluster's old members leave once the new ones vote).
A new capability (upgrades, defragmentation, space) is a planner module added to the list.

No trio, no asyncio, no I/O: everything here is a function of its arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from actors.actions import Step
from actors.model import ClusterSpec
from actors.observed import Observed
from actors.plan.adoption import adopt, auth_off_first
from actors.plan.bootstrap import membership_unknown
from actors.plan.data_loss import replace_lost_data
from actors.plan.hibernate import hibernate
from actors.plan.learners import finish_learner
from actors.plan.leftovers import delete_leftovers
from actors.plan.maintenance import maintain
from actors.plan.quorum import hold_without_quorum
from actors.plan.recovery import recover_quorum
from actors.plan.restart import restart_stopped
from actors.plan.rollout import roll_outdated
from actors.plan.size import match_size
from actors.plan.storage import replace_storage
from actors.plan.stranded import replace_stranded
from actors.plan.unplaced import replace_unplaced
from actors.plan.unresponsive import heal_unresponsive

Planner = Callable[[ClusterSpec, Observed], Step | None]

PLANNERS: tuple[Planner, ...] = (
    hibernate,
    recover_quorum,
    auth_off_first,
    membership_unknown,
    replace_stranded,
    restart_stopped,
    heal_unresponsive,
    hold_without_quorum,
    replace_lost_data,
    replace_unplaced,
    delete_leftovers,
    finish_learner,
    adopt,
    match_size,
    maintain,
    roll_outdated,
    replace_storage,
)


def plan(spec: ClusterSpec, observed: Observed, planners: Sequence[Planner] = PLANNERS) -> Step | None:
    """The single next step towards `spec`, a Wait with its reason, or None when converged."""
    for planner in planners:
        step = planner(spec, observed)
        if step is not None:
            return step
    return None

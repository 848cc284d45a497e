"""Without a healthy quorum, membership never changes: wait for members to come back, or, when
quorum cannot return, say so (with disasterRecovery Manual, a person must act)."""

from __future__ import annotations

from actors.actions import Step, Wait
from actors.model import ClusterSpec, RecoveryMode
from actors.observed import Observed
from actors.plan.recovery import quorum_loss


def hold_without_quorum(spec: ClusterSpec, observed: Observed) -> Step | None:
    if observed.has_quorum():
        return None
    loss = quorum_loss(spec, observed)
    if loss is not None and loss.permanent:
        if spec.disaster_recovery.mode is RecoveryMode.AUTOMATIC:
            then = "recovering once every survivor answers"  # the recovery planner came first
        else:
            then = "spec.disasterRecovery.mode is Manual: waiting for a person (or mode Automatic)"
        return Wait(f"quorum lost for good: {loss.describe()}; {then}")
    healthy, voters = len(observed.healthy_voters()), len(observed.voters())
    if observed.quorum_in_doubt():
        waiting = ", ".join(observed.not_heard_from())
        return Wait(f"not heard from {waiting} yet: {healthy} of {voters} voting members healthy so far")
    return Wait(f"quorum lost: {healthy} of {voters} voting members healthy")

"""Without a healthy quorum, membership never changes: wait for members to come back."""

from __future__ import annotations

from actors.actions import Step, Wait
from actors.model import ClusterSpec
from actors.observed import Observed


def hold_without_quorum(spec: ClusterSpec, observed: Observed) -> Step | None:
    if observed.has_quorum():
        return None
    healthy, voters = len(observed.healthy_voters()), len(observed.voters())
    return Wait(f"quorum lost: {healthy} of {voters} voting members healthy")

"""SpaceAvailable: whether the cluster accepts writes, and while it does not, why and what next."""

from __future__ import annotations

from actors.actions import Action, Step, Wait
from actors.maintenance.steps import ReportSpaceExhausted, mib
from actors.model import ClusterSpec, Condition
from actors.observed import Observed


def space_condition(spec: ClusterSpec, observed: Observed, step: Step | None) -> Condition:
    quota = spec.maintenance.quota_bytes
    round_ = observed.maintenance
    if round_ is not None and round_.for_space and round_.exhausted:
        return Condition("SpaceAvailable", "False", "LiveDataExceedsQuota", _told(step, "raise the quota"))
    if isinstance(step, ReportSpaceExhausted):
        return Condition("SpaceAvailable", "False", "LiveDataExceedsQuota", step.progress())
    if observed.nospace() or (round_ is not None and round_.for_space and not round_.disarmed):
        return Condition(
            "SpaceAvailable", "False", "NoSpace", _told(step, "NOSPACE alarm raised: writes are refused")
        )
    # Sizes are in members[]: a message that moved with them would rewrite the status every tick.
    return Condition("SpaceAvailable", "True", "WithinQuota", f"quota {mib(quota)}")


def _told(step: Step | None, default: str) -> str:
    if isinstance(step, Wait):
        return step.reason
    if isinstance(step, Action):
        return step.progress()
    return default

"""Members whose process runs but answers nothing (a stuck disk, a wedged process, a partition):
restarted from their data after `spec.health.unresponsiveAfter`, replaced if still silent.

Restarting keeps data and membership, so it needs no quorum; replacing does (the data-loss
path's quorum check applies). Meanwhile the other planners go on for the members that answer.
"""

from __future__ import annotations

from actors.actions import RemoveMember, RestartMember, Step
from actors.model import ClusterSpec, EtcdMember, ProcessState
from actors.observed import Observed


def heal_unresponsive(spec: ClusterSpec, observed: Observed) -> Step | None:
    limit = spec.health.unresponsive_after_seconds
    for r in sorted(observed.runtime, key=lambda r: r.name):
        silent = observed.silent_for.get(r.name, 0.0)
        if r.state is not ProcessState.RUNNING or silent < limit or observed.is_healthy(r.name):
            continue
        member = next((m for m in observed.members if observed.runtime_for(m) is r), None)
        # During a rolling restart a silent member is the new configuration's doing, not a
        # broken member: restarted again (with the rollout stopped), never replaced.
        rolling = observed.mixed_configs()
        if (
            r.name in observed.restarted_silent
            and member is not None
            and _replaceable(observed, member)
            and not rolling
        ):
            reason = f"answered no probe for {silent:.0f}s even after a restart: replaced by a new member"
            return RemoveMember(member.id, r.name, reason=reason)
        reason = f"answered no probe for {silent:.0f}s (unresponsiveAfter {spec.health.unresponsive_after})"
        return RestartMember(r.name, observed.initial_cluster(r.name), reason=reason)
    return None


def _replaceable(observed: Observed, member: EtcdMember) -> bool:
    return observed.has_quorum() and observed.can_remove(member)

"""Members whose process stopped come back from their own data; crash loops are replaced.

Restarting never changes membership, so it is always safe, and it is how a cluster that lost
quorum returns. That is why this planner runs before the quorum guard.
"""

from __future__ import annotations

from actors.actions import RemoveMember, StartMember, Step
from actors.model import ClusterSpec, ProcessState
from actors.observed import Observed
from actors.plan.common import initial_cluster

# A member that crashed this many times in a row without running healthily in between is
# taken to have corrupt data: it is replaced rather than restarted again. Runtimes count only
# exits of the member's own making; a kill by a signal (OOM killer, a person) is not one.
CRASH_LOOP_LIMIT = 3

_STOPPED = (ProcessState.EXITED, ProcessState.ABSENT)


def restart_stopped(spec: ClusterSpec, observed: Observed) -> Step | None:
    for m in sorted(observed.members, key=lambda m: m.name):
        r = observed.runtime_for(m)
        if r is None or not m.name or not r.has_data or r.state not in _STOPPED:
            continue
        crash_looping = r.consecutive_failures >= CRASH_LOOP_LIMIT
        # Only with quorum: a cluster without it needs every member back, corrupt or not.
        if crash_looping and observed.has_quorum() and observed.can_remove(m):
            reason = f"crashed {r.consecutive_failures} times in a row: data presumed corrupt"
            return RemoveMember(m.id, r.name, reason=reason)
        return StartMember(
            r.name, initial_cluster(observed, r.name), reason="process exited; restart with its data"
        )
    return None

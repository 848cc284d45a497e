"""Members whose process stopped come back from their own data; crash loops back off, then are
replaced.

Restarting never changes membership, so it is always safe, and it is how a cluster that lost
quorum returns. That is why this planner runs before the quorum guard.
"""

from __future__ import annotations

from actors.actions import RemoveMember, StartMember, Step, Wait
from actors.model import ClusterSpec, ProcessState, RuntimeMember, exit_story
from actors.observed import Observed
from supervisor.backoff import Backoff

# A member that crashed this many times in a row without running healthily in between is
# taken to have corrupt data: it is replaced rather than restarted again. Runtimes count only
# exits of the member's own making; a kill by a signal (OOM killer, a person) is not one.
CRASH_LOOP_LIMIT = 3
# The first restart after an exit is immediate; each further exit in a row doubles the wait,
# from 1 s up to a minute, so a member that cannot start costs little and says why meanwhile.
CRASH_BACKOFF = Backoff(initial=1.0, maximum=60.0, multiplier=2.0, jitter=0.0)

STOPPED = (ProcessState.EXITED, ProcessState.ABSENT)


def restart_delay(consecutive_failures: int) -> float:
    if consecutive_failures <= 1:
        return 0.0
    return CRASH_BACKOFF.base_delay(consecutive_failures - 2)


def backoff_wait(observed: Observed, r: RuntimeMember) -> Wait | None:
    """A Wait while a crash-looping member's restart delay runs; None once it may start."""
    delay = restart_delay(r.consecutive_failures)
    waited = observed.stopped_for.get(r.name, delay)
    if waited >= delay:
        return None
    return Wait(f"{r.name} {exit_story(r)}; restarting in {delay - waited:.0f}s")


def restart_stopped(spec: ClusterSpec, observed: Observed) -> Step | None:
    waits = []
    for m in sorted(observed.members, key=lambda m: m.name):
        r = observed.runtime_for(m)
        if r is None or not m.name or not r.has_data or r.state not in STOPPED:
            continue
        # During a rolling restart a crash loop is the new configuration's fault (a version
        # that does not start), not corrupt data: keep the member, the rollout stops on it.
        crash_looping = r.consecutive_failures >= CRASH_LOOP_LIMIT and not observed.mixed_configs()
        # Only with quorum: a cluster without it needs every member back, corrupt or not.
        if crash_looping and observed.has_quorum() and observed.can_remove(m):
            reason = f"{exit_story(r)}: data presumed corrupt"
            return RemoveMember(m.id, r.name, reason=reason)
        wait = backoff_wait(observed, r)
        if wait is not None:
            waits.append(wait)
            continue
        reason = f"{exit_story(r)}; restart with its data"
        return StartMember(r.name, observed.initial_cluster(r.name), reason=reason)
    return waits[0] if waits else None

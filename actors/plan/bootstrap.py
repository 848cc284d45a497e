"""No member answers, so etcd's membership is unknown: bootstrap, or bring members back."""

from __future__ import annotations

from actors.actions import RestoreSeed, StartMember, StartSeed, Step, Wait
from actors.model import ClusterSpec, ProcessState, exit_story, member_name
from actors.observed import Observed
from actors.plan.restart import STOPPED, backoff_wait

ALL_DATA_LOST = "every member lost its data: only a restore from backup can bring the data back"


def membership_unknown(spec: ClusterSpec, observed: Observed) -> Step | None:
    if observed.etcd_members is not None:
        return None
    runtime = observed.runtime
    if all_data_lost(observed):
        # Seeding afresh would pass an empty cluster off as this one.
        return Wait(ALL_DATA_LOST if runtime else f"{ALL_DATA_LOST}: no member, pod or volume is left")
    if not runtime:
        if spec.adopt is not None:  # never seed a cluster of our own in place of the one to adopt
            error = f" ({observed.membership_error})" if observed.membership_error else ""
            where = ", ".join(spec.adopt.endpoints)
            return Wait(f"spec.adopt: no member of the cluster to adopt answers at {where}{error}")
        return _seed(spec, member_name(observed.cluster, 0))
    # Bring back every member that still has data; quorum returns once a majority runs again.
    # Their own data tells etcd the membership, so no initial-cluster flags are needed.
    waits = []
    for r in sorted(runtime, key=lambda m: m.name):
        if r.has_data and r.state in STOPPED:
            wait = backoff_wait(observed, r)
            if wait is None:
                reason = f"{exit_story(r)}; restart from its data while membership is unknown"
                return StartMember(r.name, (), reason=reason)
            waits.append(wait)
    if waits:
        return waits[0]
    if any(r.state in (ProcessState.STARTING, ProcessState.RUNNING) for r in runtime):
        return Wait("waiting for members to answer")
    # Nothing runs, nothing has data, and the data is not lost: a lone member of a cluster that
    # never answered, an interrupted bootstrap.
    return backoff_wait(observed, runtime[0]) or _seed(spec, runtime[0].name)


def all_data_lost(observed: Observed) -> bool:
    """Every member lost its data, for a cluster that had members (a status listed some, or one
    answered): none left at all (pods and volumes deleted), or members none of which runs or has
    data. Several such members of a cluster never seen are lost too; a lone one is an
    interrupted bootstrap."""
    runtime = observed.runtime
    if not runtime:
        return observed.had_members
    if (len(runtime) < 2 and not observed.had_members) or any(r.has_data for r in runtime):
        return False
    return not any(r.state in (ProcessState.STARTING, ProcessState.RUNNING) for r in runtime)


def _seed(spec: ClusterSpec, name: str) -> Step:
    # spec.restore counts only here, at creation: a running cluster never goes back to a backup.
    return RestoreSeed(name, spec.restore) if spec.restore is not None else StartSeed(name)

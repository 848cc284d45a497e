"""spec.hibernate: a final backup, then every member stopped with its data kept; and waking.

Hibernating (spec.hibernate true): with spec.backup (and a store), the backup actor takes one
backup for the hibernation (verified when spec.backup.verify is on) and reports it as
`Observed.final_backup`; until then the members keep running. Then every member's process is
stopped in one step (followers first, the leader last); membership is left as it is. Once none
runs, the cluster is hibernated (phase Hibernated, assess.py) and this planner answers a Wait,
so no later planner acts on it: nothing restarts, grows, rolls or defragments. A cluster that
lost quorum cannot be backed up: it is stopped without a final backup, and the Event says so.

Waking (spec.hibernate false again): nothing here while the members have their data; the
bootstrap planner restarts them from it (etcd's membership is unknown with none running). When
every member's data is gone (volumes or data directories deleted while hibernated), a cluster
that was hibernated is rebuilt from the newest verified backup, the final one, whatever
spec.disasterRecovery says: that backup was taken for this.

Runs first: a hibernated cluster takes no other step. Pure: no trio, no I/O.
"""

from __future__ import annotations

from actors.actions import Step, StopMembers, Wait
from actors.model import ClusterSpec
from actors.observed import Observed
from actors.plan.recovery import from_backup

HIBERNATED = "hibernated: every member stopped, its data kept; spec.hibernate false wakes it"


def hibernate(spec: ClusterSpec, observed: Observed) -> Step | None:
    if not spec.hibernate:
        return _wake(spec, observed)
    running = observed.running()
    if not running:
        return Wait(HIBERNATED)
    backup = spec.backup
    wants_backup = backup is not None and backup.store is not None
    if wants_backup and observed.final_backup is None:
        if observed.has_quorum() or observed.quorum_in_doubt():
            return Wait("hibernating: taking the final backup before the members stop")
        without = "no final backup: the cluster has no quorum"
    else:
        without = "" if wants_backup else "no final backup: spec.backup is not set"
    leader = observed.leader_id()
    leads = {observed.name_of(m) for m in observed.members if leader is not None and m.id == leader}
    order = sorted(running, key=lambda r: (r.name in leads, r.name))
    key = observed.final_backup.key if wants_backup and observed.final_backup is not None else ""
    return StopMembers(tuple(r.name for r in order), backup=key, without=without)


def _wake(spec: ClusterSpec, observed: Observed) -> Step | None:
    if not observed.hibernated or observed.etcd_members is not None:
        return None
    return from_backup(spec, observed)

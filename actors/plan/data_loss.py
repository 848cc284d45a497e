"""Members etcd knows whose data is gone (volume or directory deleted) are removed; the size
planner then adds a new member in their place."""

from __future__ import annotations

from actors.actions import RemoveMember, Step
from actors.model import ClusterSpec, ProcessState
from actors.observed import Observed


def replace_lost_data(spec: ClusterSpec, observed: Observed) -> Step | None:
    for m in observed.members:
        r = observed.runtime_for(m)
        if observed.is_foreign(m):
            continue  # an adopted cluster's old member: its data is not ours to judge
        if r is not None and r.state is ProcessState.STARTING:
            # Its data directory appears as etcd starts: a runtime listing taken a moment before
            # shows none, while etcd already lists the new learner by name. A chaos run removed a
            # learner 0.1 s after adding it that way; a starting member is judged once it runs.
            continue
        started_before = bool(m.name)
        # A process may outlive its deleted data for a while, serving from open files; it can
        # never restart, so it counts as gone already.
        data_gone = r is None or not r.has_data
        if (started_before or r is None) and data_gone and observed.can_remove(m):
            return RemoveMember(m.id, observed.name_of(m), reason="its data is gone")
    return None

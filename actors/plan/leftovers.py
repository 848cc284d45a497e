"""Runtime members etcd does not know: leftovers of an interrupted add or remove."""

from __future__ import annotations

from actors.actions import DeleteRuntimeMember, Step
from actors.model import ClusterSpec
from actors.observed import Observed


def delete_leftovers(spec: ClusterSpec, observed: Observed) -> Step | None:
    known = {r.name for m in observed.members if (r := observed.runtime_for(m)) is not None}
    for r in observed.runtime:
        # Asking again would only repeat a delete under way, unless its node never confirms it.
        if r.name not in known and (not r.deleting or r.stranded):
            return DeleteRuntimeMember(r.name, reason="not a member of etcd")
    return None

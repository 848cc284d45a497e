"""Small facts several planners need: member names and etcd's initial-cluster list."""

from __future__ import annotations

from actors.model import EtcdMember, member_name, member_ordinal
from actors.observed import Observed


def next_member_name(observed: Observed) -> str:
    """A fresh name: one past the highest ordinal ever seen, so replacements are new members."""
    cluster = observed.cluster
    ordinals = [member_ordinal(cluster, m.name) for m in observed.runtime]
    ordinals += [member_ordinal(cluster, m.name) for m in observed.members]
    known = [o for o in ordinals if o is not None]
    return member_name(cluster, max(known) + 1 if known else 0)


def ordinal_of(observed: Observed, member: EtcdMember) -> int:
    ordinal = member_ordinal(observed.cluster, observed.name_of(member))
    return ordinal if ordinal is not None else -1

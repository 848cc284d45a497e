"""Leases in delta backups (pure): what the follower records of a put's lease, and which leases
a replay grants.

A key put with a lease must come back from a restore with that lease, so that it still expires.
The watch shows a put's lease ID only; the follower asks etcd once per lease for the TTL it was
granted with (LeaseTimeToLive) and stamps it on the put. A lease gone by then (expired or
revoked right after the put, or long before a follower catching up looked) is stamped
LEASE_GONE: the deletes its end caused are in the history and replay by themselves.

A replay grants each lease its puts use, with the original ID and granted TTL, before the
first transaction (a grant takes no revision), unless the snapshot it starts from holds it
already; a lease recorded as gone gets GONE_LEASE_TTL. The restored cluster counts every TTL
from its own start, as etcd does for leases in any snapshot it restores.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence

import attrs

from actors.backup.deltas import Change

# The TTL recorded for a lease already gone when the follower asked (no real TTL is 0: etcd
# raises a grant below its minimum TTL to that minimum).
LEASE_GONE = 0
# The TTL a lease recorded as gone is restored with: it was ending in the original cluster, so
# its keys go soon after a restore too, and never before the restored cluster serves them.
GONE_LEASE_TTL = 5
# How many leases' TTLs a follower remembers; one forgotten is asked again.
REMEMBERED = 65_536


@attrs.define
class LeaseTtls:
    """The granted TTL of each lease the followed puts use, so etcd is asked once per lease."""

    _known: OrderedDict[int, int] = attrs.field(factory=OrderedDict)
    limit: int = REMEMBERED

    def unknown(self, changes: Iterable[Change]) -> list[int]:
        """The leases of these puts to ask etcd about, once each, in order of first use. A lease
        known to be gone is asked again: a put with it means it was granted anew."""
        wanted: dict[int, None] = {}
        for c in changes:
            if c.lease and c.value is not None and self._known.get(c.lease, LEASE_GONE) == LEASE_GONE:
                wanted[c.lease] = None
        return list(wanted)

    def learn(self, lease: int, granted_ttl: int | None) -> None:
        """What etcd answered: the granted TTL, None for a lease that is gone."""
        self._known[lease] = LEASE_GONE if granted_ttl is None else granted_ttl
        self._known.move_to_end(lease)
        while len(self._known) > self.limit:
            self._known.popitem(last=False)

    def stamp(self, changes: Sequence[Change]) -> tuple[Change, ...]:
        """The changes, each put with a lease carrying that lease's TTL (after `learn`)."""
        return tuple(
            attrs.evolve(c, lease_ttl=self._known[c.lease])
            if c.value is not None and c.lease and c.lease in self._known
            else c
            for c in changes
        )


def leases_to_grant(changes: Iterable[Change], present: Collection[int]) -> dict[int, int]:
    """The leases a replay of `changes` grants before its first transaction, ID -> TTL: those
    its puts use that the scratch member (`present`: the snapshot's) does not hold and whose TTL
    was recorded. The first TTL recorded for a lease counts."""
    grants: dict[int, int] = {}
    for c in changes:
        if c.value is None or not c.lease or c.lease_ttl is None or c.lease in present or c.lease in grants:
            continue
        grants[c.lease] = GONE_LEASE_TTL if c.lease_ttl == LEASE_GONE else c.lease_ttl
    return grants


def replayed_lease(change: Change, granted: Collection[int]) -> int:
    """The lease a replayed put is attached to: its own when the scratch member holds it. A put
    from a chunk without TTLs whose lease the snapshot lacks comes back without one (the lease
    cannot be granted without knowing its TTL)."""
    return change.lease if change.lease in granted else 0

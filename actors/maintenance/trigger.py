"""When a defrag round starts: which members are fragmented enough, read from their Status.

Pure: the defrag actor asks these with what the cluster actor last observed.
"""

from __future__ import annotations

from actors.model import DefragSpec, MemberHealth, quantity_bytes
from actors.observed import Observed


def is_fragmented(defrag: DefragSpec, health: MemberHealth) -> bool:
    """The free share of the file reaches fragmentationRatio, and the bytes minReclaim."""
    if health.db_size <= 0:
        return False
    free = health.reclaimable
    return free / health.db_size >= defrag.fragmentation_ratio and free >= quantity_bytes(defrag.min_reclaim)


def fragmented_members(defrag: DefragSpec, observed: Observed) -> frozenset[str]:
    return frozenset(
        name
        for name, health in observed.health.items()
        if health is not None and observed.is_healthy(name) and is_fragmented(defrag, health)
    )


def fragmentation_story(observed: Observed, names: frozenset[str]) -> str:
    """ "fragmentation: demo-0 71% free (180.2 MiB)", for the round's reason."""
    parts = []
    for name in sorted(names):
        h = observed.health.get(name)
        if h is not None and h.db_size:
            parts.append(f"{name} {h.reclaimable / h.db_size:.0%} free ({h.reclaimable / 2**20:.1f} MiB)")
    return "fragmentation: " + ", ".join(parts)

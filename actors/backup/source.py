"""Where a backup is taken from and what it is called (pure).

A snapshot costs the member that serves it a full read of its database, so a healthy follower
serves it when there is one; the leader only when it is the sole healthy voter.
"""

from __future__ import annotations

from datetime import UTC, datetime

from actors.model import ClusterRef
from actors.observed import Observed


def snapshot_source(observed: Observed) -> str | None:
    """The client URL of the member to snapshot, or None when no voter is healthy."""
    leader = observed.leader_id()
    healthy = [m for m in observed.healthy_voters() if m.client_urls]
    followers = [m for m in healthy if m.id != leader]
    chosen = sorted(followers or healthy, key=observed.name_of)
    return chosen[0].client_urls[0] if chosen else None


def backup_key(prefix: str, cluster: ClusterRef, taken_at: float, revision: int) -> str:
    """<prefix><namespace>/<name>/<UTC time>-rev<revision>.db: sorted by time within a cluster.

    The revision is the cluster's just before the snapshot started: the snapshot holds every
    change up to at least it (the metadata object beside it has the exact one).
    """
    stamp = datetime.fromtimestamp(taken_at, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{prefix}{cluster.namespace}/{cluster.name}/{stamp}-rev{revision}.db"


def metadata_key(key: str) -> str:
    return f"{key}.json"


def taken_at(key: str, modified: float) -> float:
    """When a backup was taken: the time its key carries (the daemon's clock), else the store's
    modification time (a key not named by us)."""
    stamp = key.rsplit("/", 1)[-1].split("-rev", 1)[0]
    try:
        return datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return modified

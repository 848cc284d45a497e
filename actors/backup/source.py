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


# On-demand backups (EtcdBackup) are kept apart from scheduled ones: retention never deletes
# them (their EtcdBackup names them, and a restore may name that), nor do they count as the
# schedule's latest.
ON_DEMAND = "on-demand"


def backup_key(cluster: ClusterRef, taken_at: float, revision: int, on_demand: str | None = None) -> str:
    """<namespace>/<name>/<UTC time>-rev<revision>.db: sorted by time within a cluster; an
    on-demand one is <namespace>/<name>/on-demand/<backup name>-<UTC time>-rev<revision>.db.

    The revision is the cluster's just before the snapshot started: the snapshot holds every
    change up to at least it (the metadata object beside it has the exact one).
    """
    stamp = datetime.fromtimestamp(taken_at, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = f"{cluster.namespace}/{cluster.name}/"
    if on_demand is not None:
        return f"{folder}{ON_DEMAND}/{on_demand}-{stamp}-rev{revision}.db"
    return f"{folder}{stamp}-rev{revision}.db"


def snapshot_of(key: str, cluster: ClusterRef) -> bool:
    """Whether a listed key is one of the cluster's snapshots, scheduled or on demand (not
    metadata, not a delta chunk)."""
    return key.endswith(".db") and key.startswith(f"{cluster.namespace}/{cluster.name}/")


def scheduled(key: str, cluster: ClusterRef) -> bool:
    """Whether a listed key is one of the cluster's scheduled snapshots (not on-demand, not metadata)."""
    return snapshot_of(key, cluster) and not key.startswith(
        f"{cluster.namespace}/{cluster.name}/{ON_DEMAND}/"
    )


def metadata_key(key: str) -> str:
    return f"{key}.json"


def is_metadata(key: str) -> bool:
    """Whether a key is a snapshot's metadata object (kept plain JSON: retention and restores
    read it without a key, and it holds nothing of etcd's data)."""
    return key.endswith(".db.json")


def taken_at(key: str, modified: float) -> float:
    """When a backup was taken: the time its key carries (the daemon's clock), else the store's
    modification time (a key not named by us)."""
    # The stamp ends where "-rev" begins (an on-demand one follows its backup's name).
    stamp = key.rsplit("/", 1)[-1].rsplit("-rev", 1)[0][-len("YYYYmmddTHHMMSSZ") :]
    try:
        return datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return modified

"""StatusSink for local mode: each cluster's status as JSON in state_dir/<namespace>/<name>/status.json.

The file has the shape of the EtcdCluster status subresource (actors.codec.status_to_dict), so
scripts and tests read the same thing locally as `kubectl get etcdcluster -o json` shows.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from actors.assess import stamp_unset
from actors.codec import status_to_dict
from actors.model import ClusterRef, ClusterStatus
from actors.ports import StatusSink
from supervisor.local.layout import StateLayout, write_json_atomically


class StatusFiles:
    """Writes are atomic (temp file + rename): a reader never sees half a status."""

    def __init__(self, state_dir: Path, *, now: Callable[[], float] = time.time) -> None:
        self._layout = StateLayout(Path(state_dir))
        self._now = now

    def path(self, cluster: ClusterRef) -> Path:
        return self._layout.cluster(cluster).status_file

    async def publish(self, cluster: ClusterRef, status: ClusterStatus) -> None:
        # The cluster actor stamps its conditions; a status built elsewhere (a cluster refused
        # at creation) gets the time it is written, as the Kubernetes status sink gives it.
        data = status_to_dict(attrs.evolve(status, conditions=stamp_unset(status.conditions, self._now())))
        path = self.path(cluster)
        # fsync can stall on a busy disk; keep it off the trio thread.
        await trio.to_thread.run_sync(write_json_atomically, path, data)

    def remove(self, cluster: ClusterRef) -> None:
        """Forget a torn-down cluster's status (its member data is the runtime's business)."""
        with contextlib.suppress(FileNotFoundError):
            self.path(cluster).unlink()


def _conforms_to_the_port(files: StatusFiles) -> StatusSink:
    return files  # mypy proves StatusFiles implements actors.ports.StatusSink

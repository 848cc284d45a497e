"""`etcd-supervisor local FILE`: the whole daemon on the local runtime, no Kubernetes.

FILE holds EtcdCluster documents (and EtcdBackup ones: on-demand backups); every change to it
is applied (a new size scales, a removed document tears its cluster down keeping the data once
a second read confirms it, an invalid document or an unusable file is reported and changes
nothing: supervisor/local/follow.py).
SIGINT/SIGTERM stop gracefully, keeping every member's data, so running the same command
again resumes the same clusters. Members are processes of their own: if the
daemon dies (or exits with leave_members_running), they keep serving and the next daemon adopts them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import trio
from prometheus_client import CollectorRegistry

from actors.cluster_context import Timing
from actors.maintenance.actor import defrag_child
from actors.measurements import Measurement
from actors.model import ClusterRef, ClusterStatus
from actors.platform import open_supervisor
from supervisor.aio import open_asyncio_loop
from supervisor.audit import AuditLogged
from supervisor.local.backup_requests import LocalBackupRequests
from supervisor.local.env import env_command
from supervisor.local.follow import ManifestFollower
from supervisor.local.manifest import Unreadable, watch_manifest
from supervisor.local.platform import local_platform
from supervisor.local.runtime import open_local_runtime
from supervisor.local.status_files import StatusFiles
from supervisor.local.table import StatusBoard
from supervisor.metrics import open_runtime_metrics
from supervisor.metrics.clusters import ClusterMetrics
from supervisor.metrics.http import Endpoints, Readiness, serve_endpoints
from supervisor.metrics.loglevel import follow_log_level_file
from supervisor.signals import cancel_on_signal

log = logging.getLogger(__name__)


class LocalSinks:
    """Status to status.json and the terminal board; events to the log and events.jsonl (the audit trail)."""

    def __init__(self, state_dir: Path, board: StatusBoard | None) -> None:
        self._files = StatusFiles(state_dir)
        self._events = AuditLogged(EventFiles(state_dir))
        self._board = board
        self.statuses: dict[ClusterRef, ClusterStatus] = {}
        self.on_forget: Callable[[ClusterRef], None] = lambda cluster: None  # the metrics' series

    async def publish(self, cluster: ClusterRef, status: ClusterStatus) -> None:
        self.statuses[cluster] = status
        await self._files.publish(cluster, status)
        if self._board is not None:
            self._board.update(self.statuses)

    async def record(
        self,
        cluster: ClusterRef,
        *,
        reason: str,
        message: str,
        warning: bool = False,
        measured: Measurement | None = None,
    ) -> None:
        await self._events.record(cluster, reason=reason, message=message, warning=warning, measured=measured)

    def show_file_problems(self, problems: list[str]) -> None:
        if self._board is not None:
            self._board.show_problems(problems)

    def forget(self, cluster: ClusterRef) -> None:
        self.on_forget(cluster)
        self.statuses.pop(cluster, None)
        self._files.remove(cluster)
        if self._board is not None:
            self._board.update(self.statuses)


class EventFiles:
    """actors.ports.EventSink: one JSON line per operation in the cluster's events.jsonl."""

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir

    async def record(
        self,
        cluster: ClusterRef,
        *,
        reason: str,
        message: str,
        warning: bool = False,
        measured: Measurement | None = None,
    ) -> None:
        entry = {
            "time": time.time(),
            "cluster": str(cluster),
            "reason": reason,
            "message": message,
            "warning": warning,
        }
        path = self._state_dir / cluster.namespace / cluster.name / "events.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:
            out.write(json.dumps(entry) + "\n")


async def run_local(
    file: Path,
    state_dir: Path,
    *,
    timing: Timing | None = None,
    show_board: bool = True,
    on_ready: Callable[[], None] | None = None,
    leave_members_running: bool = False,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    log_level_file: Path | None = None,
    etcd_dir: Path | None = None,
) -> None:
    """metrics_port: serve /metrics, /healthz, /readyz and /loglevel there (0: any free port,
    written to <state-dir>/metrics-port); None: no HTTP endpoints."""
    timing = timing or Timing()
    board = StatusBoard(env_command=env_command(state_dir)) if show_board else None
    sinks = LocalSinks(state_dir, board)
    registry = CollectorRegistry()
    metrics = ClusterMetrics(registry, sinks, sinks)
    sinks.on_forget = metrics.forget
    requests = LocalBackupRequests(state_dir, metrics)  # the EtcdBackup documents of the file
    async with (
        open_runtime_metrics(registry),
        open_asyncio_loop(),
        open_local_runtime(
            state_dir, etcd_dir=etcd_dir, leave_members_running=leave_members_running
        ) as runtime,
        open_supervisor(
            local_platform(
                runtime,
                metrics,
                timing,
                manifest_dir=file.parent,
                scratch_dir=state_dir / ".scratch",
                requests=requests,
            ),
            name="etcd-supervisor",
            timing=timing,
            children=[defrag_child(), metrics.child],
        ) as fleet,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(cancel_on_signal, nursery.cancel_scope)
        if log_level_file is not None:
            nursery.start_soon(follow_log_level_file, log_level_file)
        if metrics_port is not None:
            endpoints = Endpoints(Readiness(), registry)
            bound = await nursery.start(partial(serve_endpoints, metrics_port, endpoints, host=metrics_host))
            (state_dir / "metrics-port").write_text(f"{bound}\n")
        send, receive = trio.open_memory_channel[str | Unreadable](1)
        nursery.start_soon(watch_manifest, file, send)
        if board is not None:
            nursery.start_soon(board.run)
        if on_ready is not None:
            on_ready()
        await ManifestFollower(file, fleet, sinks, backups=requests).run(receive)
    kept = "members left running for the next daemon" if leave_members_running else "member data kept"
    log.info("stopped; %s in %s", kept, state_dir, extra={"event": "shutdown"})

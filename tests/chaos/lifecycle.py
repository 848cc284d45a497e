"""A whole supervisor on the local runtime, for lifecycle and chaos tests: real etcd processes,
the real actors, the real etcd client. Statuses and events are collected in memory."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import attrs
import trio

from actors.cluster import ClusterPorts, Timing
from actors.fleet import Fleet
from actors.model import ClusterRef, ClusterResource, ClusterSpec, ClusterStatus, Phase
from supervisor.aio import open_asyncio_loop
from supervisor.etcd.admin import EtcdAdminAdapter
from supervisor.etcd.tls import TlsConfig
from supervisor.local.runtime import LocalRuntime, open_local_runtime
from supervisor.runtime import Intensity, Supervisor

# Faster than the daemon's defaults so tests converge quickly; same logic.
FAST = Timing(tick=0.3, call_timeout=3.0, probe_timeout=0.8, health_ttl=1.5)


@attrs.define
class Recorder:
    """StatusSink and EventSink in memory, so tests can wait on what the actors published."""

    statuses: dict[ClusterRef, ClusterStatus] = attrs.field(factory=dict)
    history: list[tuple[ClusterRef, ClusterStatus]] = attrs.field(factory=list)
    events: list[tuple[ClusterRef, str, str]] = attrs.field(factory=list)
    changed: trio.Event = attrs.field(factory=trio.Event)

    async def publish(self, cluster: ClusterRef, status: ClusterStatus) -> None:
        self.statuses[cluster] = status
        self.history.append((cluster, status))
        self.changed.set()
        self.changed = trio.Event()

    async def record(self, cluster: ClusterRef, *, reason: str, message: str, warning: bool = False) -> None:
        self.events.append((cluster, reason, message))

    def phases(self, cluster: ClusterRef) -> list[str]:
        """Published phases in order, repeats folded."""
        out: list[str] = []
        for ref, status in self.history:
            if ref == cluster and (not out or out[-1] != status.phase.value):
                out.append(status.phase.value)
        return out

    def reasons(self, cluster: ClusterRef) -> list[str]:
        return [reason for ref, reason, _ in self.events if ref == cluster]


@attrs.define
class LocalSupervisor:
    fleet: Fleet
    runtime: LocalRuntime
    recorder: Recorder
    admins: list[EtcdAdminAdapter]

    async def wait_for(self, ref: ClusterRef, predicate, *, timeout: float) -> ClusterStatus:
        """Wait until the published status satisfies predicate; fail with the last status seen."""
        with trio.move_on_after(timeout):
            while True:
                status = self.recorder.statuses.get(ref)
                if status is not None and predicate(status):
                    return status
                await self.recorder.changed.wait()
        raise AssertionError(
            f"{ref}: condition not met in {timeout}s; last status: {self.recorder.statuses.get(ref)}"
        )

    async def wait_healthy(self, ref: ClusterRef, size: int, *, timeout: float = 60.0) -> ClusterStatus:
        return await self.wait_for(ref, lambda s: is_healthy(s, size), timeout=timeout)


def is_healthy(status: ClusterStatus, size: int) -> bool:
    return (
        status.phase is Phase.RUNNING
        and status.ready_replicas == size
        and len(status.members) == size
        and all(m.healthy for m in status.members)
    )


def resource(
    name: str = "demo", size: int = 3, namespace: str = "default", generation: int = 1
) -> ClusterResource:
    return ClusterResource(ClusterRef(namespace, name), ClusterSpec(size=size, tls_enabled=False), generation)


@contextlib.asynccontextmanager
async def open_local_supervisor(
    state_dir: Path, *, timing: Timing = FAST, wrap: Callable[[ClusterPorts], ClusterPorts] | None = None
) -> AsyncIterator[LocalSupervisor]:
    recorder = Recorder()
    admins: list[EtcdAdminAdapter] = []
    async with open_asyncio_loop(), open_local_runtime(state_dir) as runtime:

        def ports_for(res: ClusterResource) -> ClusterPorts:
            runtime.set_cluster_spec(res.ref, res.spec)
            files = runtime.client_tls_files(res.ref)
            tls = TlsConfig(files.ca, files.cert, files.key) if files else None
            admin = EtcdAdminAdapter(tls=tls, call_timeout=timing.call_timeout)
            admins.append(admin)
            ports = ClusterPorts(runtime, admin, recorder, recorder)
            return wrap(ports) if wrap else ports

        root = Supervisor("test-root", intensity=Intensity(100, 10.0))
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(root.run)
                yield LocalSupervisor(Fleet(root, ports_for, timing=timing), runtime, recorder, admins)
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                for admin in admins:
                    await admin.aclose()

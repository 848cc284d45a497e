"""The local supervisor embedded in another program: real etcd processes, the real actors and
etcd client, statuses and events kept in memory where the program can wait on them.

What benchmarks and the lifecycle and chaos tests run; `etcd-supervisor local` is the same
wiring (a local Platform, open_supervisor) with status files and a terminal board as its sinks.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import attrs
import trio

from actors.backup.ports import BackupKeySource
from actors.cluster_context import ChildFactory, Timing
from actors.fleet import Fleet
from actors.measurements import Measurement
from actors.model import ClusterRef, ClusterStatus, Phase, StoreSpec
from actors.platform import Platform, open_supervisor
from actors.store_port import ObjectStore
from supervisor.aio import open_asyncio_loop
from supervisor.local.platform import local_admins, local_auth
from supervisor.local.restore import LocalRestorer
from supervisor.local.runtime import LocalRuntime, open_local_runtime
from supervisor.runtime import Intensity


@attrs.define
class Recorder:
    """StatusSink and EventSink in memory, so a program can wait on what the actors published."""

    statuses: dict[ClusterRef, ClusterStatus] = attrs.field(factory=dict)
    history: list[tuple[ClusterRef, ClusterStatus]] = attrs.field(factory=list)
    events: list[tuple[ClusterRef, str, str]] = attrs.field(factory=list)
    # What the operations measured beside their Events: (cluster, reason, measurement).
    measurements: list[tuple[ClusterRef, str, Measurement]] = attrs.field(factory=list)
    changed: trio.Event = attrs.field(factory=trio.Event)

    async def publish(self, cluster: ClusterRef, status: ClusterStatus) -> None:
        self.statuses[cluster] = status
        self.history.append((cluster, status))
        self._wake_waiters()

    def _wake_waiters(self) -> None:
        """Waits re-check their condition on every status and every event."""
        self.changed.set()
        self.changed = trio.Event()

    async def record(
        self,
        cluster: ClusterRef,
        *,
        reason: str,
        message: str,
        warning: bool = False,
        measured: Measurement | None = None,
    ) -> None:
        self.events.append((cluster, reason, message))
        if measured is not None:
            self.measurements.append((cluster, reason, measured))
        self._wake_waiters()

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

    async def wait_for(self, ref: ClusterRef, predicate: Callable[[ClusterStatus], bool]) -> ClusterStatus:
        """The first published status of `ref` that satisfies `predicate` (bound it with fail_after)."""
        while True:
            status = self.recorder.statuses.get(ref)
            if status is not None and predicate(status):
                return status
            await self.recorder.changed.wait()

    async def wait_healthy(self, ref: ClusterRef, size: int) -> ClusterStatus:
        return await self.wait_for(ref, lambda s: is_healthy(s, size))


def is_healthy(status: ClusterStatus, size: int) -> bool:
    return (
        status.phase is Phase.RUNNING
        and status.ready_replicas == size
        and len(status.members) == size
        and all(m.healthy for m in status.members)
    )


@contextlib.asynccontextmanager
async def open_local_supervisor(
    state_dir: Path,
    *,
    timing: Timing,
    wrap: Callable[[Platform], Platform] | None = None,
    children: Callable[[LocalRuntime], Sequence[ChildFactory]] = lambda runtime: (),
    stores: Callable[[StoreSpec], ObjectStore] | None = None,
    keys: BackupKeySource | None = None,
    etcd_dir: Path | None = None,
    leave_members_running: bool = False,
    secrets_dir: Path | None = None,
) -> AsyncIterator[LocalSupervisor]:
    """The daemon's own wiring (the local runtime and admins, open_supervisor) with an in-memory
    recorder as the sinks. `stores`: where restores come from, `keys` their decryption keys
    (backups are the caller's `children`, at the pace it sets); `wrap`: a test's variant of the
    platform (faults); `leave_members_running`: etcd keeps serving after it, for the next one to adopt;
    `secrets_dir`: where Secrets named by a spec are directories (spec.adopt's, secretRef's)."""
    recorder = Recorder()
    async with (
        open_asyncio_loop(),
        open_local_runtime(
            state_dir, etcd_dir=etcd_dir, leave_members_running=leave_members_running
        ) as runtime,
    ):
        restorer = LocalRestorer(runtime, stores, keys=keys) if stores is not None else None
        platform = Platform(
            runtime,
            recorder,
            recorder,
            local_admins(runtime, timing, secrets_dir=secrets_dir),
            restorer,
            certificates=runtime.certificates(secrets_dir),
            auth_for=local_auth(runtime, timing, secrets_dir=secrets_dir or state_dir),
        )
        async with open_supervisor(
            wrap(platform) if wrap else platform,
            name="test-root",
            timing=timing,
            intensity=Intensity(100, 10.0),
            children=children(runtime),
        ) as fleet:
            yield LocalSupervisor(fleet, runtime, recorder)

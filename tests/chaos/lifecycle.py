"""A whole supervisor on the local runtime for lifecycle and chaos tests (supervisor/local/embedded.py),
at test speed, and the clusters they run."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.backup.ports import BackupKeySource
from actors.cluster_context import ChildFactory, Timing
from actors.fleet import Fleet
from actors.model import ClusterRef, ClusterResource, ClusterSpec, ClusterStatus, StoreSpec
from actors.platform import Platform
from actors.store_port import ObjectStore
from supervisor.local import embedded
from supervisor.local.embedded import Recorder, is_healthy
from supervisor.local.runtime import LocalRuntime

__all__ = ["FAST", "LocalSupervisor", "is_healthy", "open_local_supervisor", "resource"]

# Faster than the daemon's defaults so tests converge quickly; same logic.
FAST = Timing(tick=0.3, call_timeout=3.0, probe_timeout=0.8, health_ttl=1.5)


def resource(
    name: str = "demo", size: int = 3, namespace: str = "default", generation: int = 1
) -> ClusterResource:
    return ClusterResource(ClusterRef(namespace, name), ClusterSpec(size=size, tls_enabled=False), generation)


@attrs.define
class LocalSupervisor:
    """The embedded supervisor, with waits that fail a test naming the last status seen."""

    inner: embedded.LocalSupervisor

    @property
    def fleet(self) -> Fleet:
        return self.inner.fleet

    @property
    def runtime(self) -> LocalRuntime:
        return self.inner.runtime

    @property
    def recorder(self) -> Recorder:
        return self.inner.recorder

    async def wait_for(self, ref: ClusterRef, predicate, *, timeout: float) -> ClusterStatus:
        with trio.move_on_after(timeout):
            return await self.inner.wait_for(ref, predicate)
        last = self.recorder.statuses.get(ref)
        events = [f"{reason}: {message}" for r, reason, message in self.recorder.events if r == ref][-12:]
        raise AssertionError(
            f"{ref}: condition not met in {timeout}s; last status: {last}; last events: {events}"
        )

    async def wait_healthy(self, ref: ClusterRef, size: int, *, timeout: float = 60.0) -> ClusterStatus:
        return await self.wait_for(ref, lambda s: is_healthy(s, size), timeout=timeout)


@contextlib.asynccontextmanager
async def open_local_supervisor(
    state_dir: Path,
    *,
    timing: Timing = FAST,
    wrap: Callable[[Platform], Platform] | None = None,
    children: Callable[[LocalRuntime], Sequence[ChildFactory]] = lambda runtime: (),
    stores: Callable[[StoreSpec], ObjectStore] | None = None,
    keys: BackupKeySource | None = None,
    etcd_dir: Path | None = None,
    leave_members_running: bool = False,
    secrets_dir: Path | None = None,
) -> AsyncIterator[LocalSupervisor]:
    async with embedded.open_local_supervisor(
        state_dir,
        timing=timing,
        wrap=wrap,
        children=children,
        stores=stores,
        keys=keys,
        etcd_dir=etcd_dir,
        leave_members_running=leave_members_running,
        secrets_dir=secrets_dir,
    ) as sup:
        yield LocalSupervisor(sup)


async def follow_members(sup: LocalSupervisor, ref: ClusterRef, *clients: Any) -> None:
    """Keep each client's `endpoints` list on the cluster's voting members as the status shows
    them, so workloads follow members as they come and go."""
    while True:
        status = sup.recorder.statuses.get(ref)
        urls = (
            [m.client_url for m in status.members if m.client_url and m.role.value != "learner"]
            if status
            else []
        )
        if urls:
            for client in clients:
                client.endpoints[:] = urls
        await trio.sleep(0.3)


def rolled_since(events: list, start: int) -> list[tuple[str, str]]:
    """(reason, member or target) of a rolling restart's steps recorded from events[start:]."""
    out = []
    for _, reason, message in events[start:]:
        if reason in ("MemberRolled", "LeaderMoved"):
            words = message.split()
            out.append((reason, words[2] if reason == "MemberRolled" else words[3].rstrip(":")))
    return out

"""Fault injection around the real ports, and a writer that remembers every acknowledged write."""

from __future__ import annotations

import os
from collections.abc import Sequence

import attrs
import trio

from actors.model import ClusterRef, MemberHealth, RuntimeMember
from actors.platform import Platform
from actors.ports import EtcdAdmin, MemberRuntime
from supervisor.etcd.client import open_etcd_client
from supervisor.etcd.errors import EtcdError
from tests.harness.poll import more_acknowledged


class InjectedFault(RuntimeError):
    """Raised inside an actor on purpose: its supervisor must restart it and nothing may be lost."""


@attrs.define
class FaultPlan:
    """How many crashes are still to be injected, per place; tests arm them and count them."""

    member_probe_crashes: int = 0
    cluster_observe_crashes: int = 0
    injected: list[str] = attrs.field(factory=list)


class CrashingAdmin:
    """The real EtcdAdmin; member_health (run inside member actors) raises while armed."""

    def __init__(self, inner: EtcdAdmin, faults: FaultPlan) -> None:
        self._inner = inner
        self._faults = faults

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._inner, name)

    async def member_health(self, client_url: str) -> MemberHealth:
        if self._faults.member_probe_crashes > 0:
            self._faults.member_probe_crashes -= 1
            self._faults.injected.append(f"member actor for {client_url}")
            raise InjectedFault(f"injected crash probing {client_url}")
        return await self._inner.member_health(client_url)


class CrashingRuntime:
    """The real MemberRuntime; list_members (run inside the cluster actor) raises while armed."""

    def __init__(self, inner: MemberRuntime, faults: FaultPlan) -> None:
        self._inner = inner
        self._faults = faults

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._inner, name)

    async def list_members(self, cluster: ClusterRef) -> Sequence[RuntimeMember]:
        if self._faults.cluster_observe_crashes > 0:
            self._faults.cluster_observe_crashes -= 1
            self._faults.injected.append("cluster actor")
            raise InjectedFault("injected crash in the cluster actor")
        return await self._inner.list_members(cluster)


def with_faults(faults: FaultPlan):  # type: ignore[no-untyped-def]
    """The local Platform with its runtime and every cluster's admin crashing while armed."""

    def wrap(platform: Platform) -> Platform:
        return attrs.evolve(
            platform,
            runtime=CrashingRuntime(platform.runtime, faults),
            admin_for=lambda resource: CrashingAdmin(platform.admin_for(resource), faults),
        )

    return wrap


@attrs.define
class AckedWriter:
    """Writes key after key; remembers exactly the writes etcd acknowledged."""

    endpoints: list[str]
    acked: dict[bytes, bytes] = attrs.field(factory=dict)
    failures: int = 0

    async def run(self, *, pause: float = 0.01) -> None:
        async with open_etcd_client(self.endpoints, call_timeout=2.0) as client:
            n = 0
            while True:
                client.set_endpoints(self.endpoints)
                key, value = f"chaos/{n:06d}".encode(), os.urandom(16).hex().encode()
                try:
                    await client.put(key, value)
                except EtcdError:
                    self.failures += 1  # not acknowledged: may or may not exist, never counted
                else:
                    self.acked[key] = value
                n += 1
                await trio.sleep(pause)

    async def wait_for_more(self, count: int = 20, *, timeout: float = 30) -> None:
        """Until `count` more writes are acknowledged: the cluster takes writes again."""
        await more_acknowledged(self.acked, count, within=timeout)

    async def verify(self) -> int:
        """Read every acknowledged key back (linearizable reads); returns how many were checked."""
        async with open_etcd_client(self.endpoints, call_timeout=10.0) as client:
            stored = {kv.key: kv.value for kv in await client.range(b"chaos/", b"chaos0")}
        missing = {k for k in self.acked if stored.get(k) != self.acked[k]}
        assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {sorted(missing)[:5]}"
        return len(self.acked)

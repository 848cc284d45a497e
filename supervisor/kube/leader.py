"""Leader election on a coordination.k8s.io/v1 Lease, client-go's algorithm, trio-shaped.

One replica holds the Lease and runs the operator; the others wait. Every write carries the
Lease's resourceVersion, so two candidates can never both believe they won. A candidate
judges a foreign lease expired by its own clock (no new renewal *observed* for
leaseDurationSeconds), never by comparing the holder's renewTime with its clock: replica
clocks may disagree.

The holder renews every retry_period; if no renewal has succeeded for renew_deadline (which
is shorter than the lease duration), or the Lease names another holder, the body is
cancelled at once, before anyone else can have taken over.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from attrs import frozen

from supervisor.kube.client import KubeClient, KubeError, is_conflict, is_not_found

log = logging.getLogger(__name__)

Obj = dict[str, Any]

LEASE_NAME = "etcd-supervisor"


@frozen
class LeaderElectionConfig:
    namespace: str
    identity: str
    name: str = LEASE_NAME
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __attrs_post_init__(self) -> None:
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("leader election needs retry_period < renew_deadline < lease_duration")


@frozen
class LeaderStatistics:
    is_leader: bool
    holder: str | None  # as last read from the Lease
    acquisitions: int
    losses: int


class LeadershipLost(Exception):
    pass


def _micro_time(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        config: LeaderElectionConfig,
        *,
        wall_clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self._config = config
        self._wall = wall_clock
        self._rng = rng or random.Random()
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases/{config.name}"
        self._lease: Obj | None = None  # as we last wrote or read it
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._is_leader = False
        self._acquisitions = self._losses = 0

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    def statistics(self) -> LeaderStatistics:
        spec = (self._lease or {}).get("spec") or {}
        return LeaderStatistics(
            is_leader=self._is_leader,
            holder=spec.get("holderIdentity") or None,
            acquisitions=self._acquisitions,
            losses=self._losses,
        )

    async def run(self, body: Callable[[], Awaitable[None]]) -> None:
        """Run `body` whenever this replica holds the lease, for as long as it does.

        Waits for the lease, runs body; if the lease is lost, body is cancelled and the wait
        starts over. Returns when body returns (the lease is then released). Cancelling run()
        releases the lease too, so a successor takes over at once instead of after a lease
        duration.
        """
        while True:
            await self._acquire()
            if not await self._lead(body):
                return

    async def _lead(self, body: Callable[[], Awaitable[None]]) -> bool:
        """Run body under the lease; True if the lease was lost (body cancelled)."""
        lost = False
        self._is_leader = True
        self._acquisitions += 1
        log.info(
            "%s: became leader (lease %s/%s)",
            self._config.identity,
            self._config.namespace,
            self._config.name,
        )
        try:
            async with trio.open_nursery() as nursery:

                async def keep_renewing() -> None:
                    nonlocal lost
                    try:
                        await self._renew_until_lost()
                    except LeadershipLost as exc:
                        log.warning("%s: leadership lost: %s", self._config.identity, exc)
                        # Not leader from this moment, before the body has finished unwinding.
                        self._is_leader, lost = False, True
                        self._losses += 1
                        nursery.cancel_scope.cancel()

                nursery.start_soon(keep_renewing)
                await body()
                nursery.cancel_scope.cancel()
        finally:
            self._is_leader = False
            if not lost:
                with trio.CancelScope(shield=True), trio.move_on_after(self._config.retry_period):
                    await self._release()
        return lost

    # --- the Lease -----------------------------------------------------------------------------

    def _record(self, *, transitions: int, acquire_time: str | None) -> Obj:
        now = _micro_time(self._wall())
        return {
            "holderIdentity": self._config.identity,
            "leaseDurationSeconds": max(1, round(self._config.lease_duration)),
            "acquireTime": acquire_time or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    async def _try_acquire_or_renew(self) -> bool:
        """One attempt to hold the lease; False if another holder's lease is still valid."""
        lease = await self._client.get_or_none(self._path)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self._config.name, "namespace": self._config.namespace},
                "spec": self._record(transitions=0, acquire_time=None),
            }
            try:
                self._lease = await self._client.create(self._path.rsplit("/", 1)[0], body)
            except KubeError as exc:
                if is_conflict(exc):
                    return False  # another candidate created it first
                raise
            return True
        self._lease = lease
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        mine = holder == self._config.identity
        observed = (holder, spec.get("renewTime"), spec.get("acquireTime"), spec.get("leaseTransitions"))
        if observed != self._observed:
            self._observed, self._observed_at = observed, trio.current_time()
        duration = float(spec.get("leaseDurationSeconds") or self._config.lease_duration)
        if holder and not mine and trio.current_time() < self._observed_at + duration:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        new = dict(lease)
        new["spec"] = self._record(
            transitions=transitions, acquire_time=spec.get("acquireTime") if mine else None
        )
        try:
            self._lease = await self._client.replace(self._path, new)
        except KubeError as exc:
            if is_conflict(exc):
                return False  # someone wrote in between; look again
            raise
        self._observed = None
        return True

    async def _acquire(self) -> None:
        while True:
            try:
                if await self._try_acquire_or_renew():
                    return
            except KubeError as exc:
                log.warning("%s: leader election: %s", self._config.identity, exc)
            # Jitter, so candidates that lost together do not retry together.
            await trio.sleep(self._config.retry_period * (1 + self._rng.random() * 0.2))

    async def _renew_until_lost(self) -> None:
        cfg = self._config
        last_renewed = trio.current_time()
        while True:
            await trio.sleep(cfg.retry_period)
            deadline = last_renewed + cfg.renew_deadline
            with trio.move_on_at(deadline):
                while True:
                    try:
                        if await self._renew_once():
                            last_renewed = trio.current_time()
                            break
                    except KubeError as exc:
                        log.warning("%s: lease renewal failed: %s", cfg.identity, exc)
                    await trio.sleep(min(cfg.retry_period, max(0.0, deadline - trio.current_time())))
            if last_renewed + cfg.renew_deadline <= trio.current_time():
                raise LeadershipLost(f"lease not renewed for {cfg.renew_deadline:.1f}s")

    async def _renew_once(self) -> bool:
        lease = self._lease
        if lease is None:
            lease = await self._client.get(self._path)
        holder = ((lease.get("spec") or {}).get("holderIdentity")) or ""
        if holder != self._config.identity:
            raise LeadershipLost(f"the lease is held by {holder or 'nobody'}")
        new = dict(lease)
        spec = lease.get("spec") or {}
        new["spec"] = self._record(
            transitions=int(spec.get("leaseTransitions") or 0), acquire_time=spec.get("acquireTime")
        )
        try:
            self._lease = await self._client.replace(self._path, new)
            return True
        except KubeError as exc:
            if is_conflict(exc) or is_not_found(exc):
                # Someone else wrote the Lease: read it; the next try sees who holds it.
                self._lease = await self._client.get_or_none(self._path)
                if self._lease is None:
                    raise LeadershipLost("the lease was deleted") from exc
                return False
            raise

    async def _release(self) -> None:
        try:
            lease = await self._client.get_or_none(self._path)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self._config.identity:
                return
            new = dict(lease)
            spec = dict(lease.get("spec") or {})
            # client-go's release: no holder, a one-second lease, so candidates take over at once.
            spec.pop("holderIdentity", None)
            spec["leaseDurationSeconds"] = 1
            spec["renewTime"] = _micro_time(self._wall())
            new["spec"] = spec
            await self._client.replace(self._path, new)
            log.info("%s: released the lease", self._config.identity)
        except KubeError as exc:
            log.warning("%s: could not release the lease: %s", self._config.identity, exc)

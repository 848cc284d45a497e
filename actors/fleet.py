"""The fleet: one cluster tree per EtcdCluster, started, updated and torn down as resources come and go.

`open_fleet` is the root under the one wiring seam every entry point uses (`open_supervisor`
in actors/platform.py: the local daemon, the Kubernetes operator, the lifecycle, chaos and actor
tests): a root supervisor, the fleet on it, and on exit every cluster's ports closed after its
actors stopped.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager

import attrs
import trio
from attrs import define

from actors.cluster import cluster_tree
from actors.cluster_context import ChildFactory, ClusterMessage, Desired, GetStatus, SpecChanged, Timing
from actors.model import ClusterRef, ClusterResource, ClusterStatus, ReclaimPolicy
from actors.plan import PLANNERS, Planner
from actors.ports import ClusterPorts
from actors.spec_changes import refused_changes
from supervisor.runtime import ChildSpec, Handle, Intensity, Supervisor
from supervisor.runtime.logfields import with_log_fields

log = logging.getLogger(__name__)

# Restarts of whole cluster trees tolerated before the fleet's root gives up.
ROOT_INTENSITY = Intensity(50, 60.0)

# Opens the ports of one cluster (its etcd admin above all); the fleet closes them.
PortsFactory = Callable[[ClusterResource], ClusterPorts]


@define
class _Entry:
    desired: Desired
    handle: Handle[ClusterMessage]
    ports: ClusterPorts


class Fleet:
    """Keeps the set of running cluster trees equal to the set of resources it is given.

    The desired state of each cluster lives here, outside the cluster actor, so a restarted
    actor reads it afresh instead of from memory that died with it.
    """

    def __init__(
        self,
        root: Supervisor,
        ports_for: PortsFactory,
        *,
        timing: Timing | None = None,
        children: Sequence[ChildFactory] = (),
        planners: Sequence[Planner] = PLANNERS,
    ) -> None:
        self._root = root
        self._ports_for = ports_for
        self._timing = timing or Timing()
        self._children = tuple(children)
        self._planners = tuple(planners)
        self._clusters: dict[ClusterRef, _Entry] = {}

    def refs(self) -> list[ClusterRef]:
        return sorted(self._clusters)

    async def apply(
        self, resources: Sequence[ClusterResource], problems: Mapping[ClusterRef, str] | None = None
    ) -> None:
        """Make the running clusters exactly `resources`.

        `problems` names clusters whose latest document was invalid: they keep their last
        good spec and report the problem, and are neither created nor torn down because of it.
        """
        problems = problems or {}
        wanted = {r.ref: r for r in resources}
        for ref in sorted(set(self._clusters) - set(wanted) - set(problems)):
            await self.remove(ref)
        for _ref, resource in sorted(wanted.items()):
            await self.upsert(Desired(resource))
        for ref, problem in sorted(problems.items()):
            await self.report_problem(ref, problem)

    def __contains__(self, ref: object) -> bool:
        return ref in self._clusters

    async def report_problem(self, ref: ClusterRef, problem: str) -> bool:
        """The latest edit of a running cluster was invalid: keep its spec, report why.

        Returns False when no such cluster runs (the caller reports the problem itself).
        """
        entry = self._clusters.get(ref)
        if entry is None:
            return False
        await self.upsert(Desired(entry.desired.resource, problem))
        return True

    async def upsert(self, desired: Desired) -> None:
        ref = desired.resource.ref
        entry = self._clusters.get(ref)
        if entry is not None:
            if entry.desired.resource.spec.restore != desired.resource.spec.restore:
                log.warning(
                    "cluster %s: spec.restore is read only when a cluster is created; the change is ignored",
                    ref,
                    extra={"event": "ignored-change", "cluster": str(ref)},
                )
            # The members a status listed are noted once: the actor's own status writes come
            # back here on every change and must not look like spec changes; and once noted they
            # stay, so an actor restarted after a crash still knows the cluster had members.
            recorded = entry.desired.resource.recorded_members or desired.resource.recorded_members
            # The phase on record is the one read first (later ones are the actor's own writes).
            phase = entry.desired.resource.recorded_phase
            kept = attrs.evolve(desired.resource, recorded_members=recorded, recorded_phase=phase)
            desired = attrs.evolve(desired, resource=kept)
            refused = refused_changes(entry.desired.resource.spec, desired.resource.spec)
            if refused:
                # Keep serving the spec in force; say which change was refused and why.
                problem = "; ".join(str(e) for e in refused)
                desired = Desired(entry.desired.resource, problem)
            if entry.desired != desired:
                entry.desired = desired
                await entry.handle.send(SpecChanged())
            return
        ports = self._ports_for(desired.resource)

        def current() -> Desired:
            return self._clusters[ref].desired

        tree, handle = cluster_tree(
            ref, current, ports, self._timing, children=self._children, planners=self._planners
        )
        self._clusters[ref] = _Entry(desired, handle, ports)
        log.info("cluster %s: starting", ref, extra={"event": "cluster-start", "cluster": str(ref)})
        await self._root.add_child(_tree_child(ref, tree))

    async def remove(self, ref: ClusterRef) -> None:
        """Stop the cluster's actors, then its members; data stays unless reclaimPolicy is Delete."""
        entry = self._clusters.pop(ref)
        await self._root.remove_child(str(ref))
        keep = entry.desired.resource.spec.storage.reclaim_policy is ReclaimPolicy.RETAIN
        try:
            await entry.ports.runtime.delete_cluster(ref, keep_data=keep)
        finally:
            await entry.ports.aclose()
        extra = {"event": "cluster-stop", "cluster": str(ref)}
        log.info("cluster %s: torn down (data kept: %s)", ref, keep, extra=extra)

    async def aclose(self) -> None:
        """Close every cluster's ports; call once the root supervisor has stopped."""
        for entry in self._clusters.values():
            await entry.ports.aclose()

    async def status(self, ref: ClusterRef, *, wait_at_most: float = 5.0) -> ClusterStatus | None:
        entry = self._clusters.get(ref)
        if entry is None:
            return None
        return await entry.handle.call(GetStatus, timeout=wait_at_most)

    def handle(self, ref: ClusterRef) -> Handle[ClusterMessage]:
        return self._clusters[ref].handle


def _tree_child(ref: ClusterRef, tree: Supervisor) -> ChildSpec:
    # Every log line of the cluster's actors carries `cluster`, whoever writes it.
    return ChildSpec(str(ref), with_log_fields(tree.run, cluster=str(ref)), shutdown=10.0)  # type: ignore[arg-type]  # keyword-only task_status


@asynccontextmanager
async def open_fleet(
    ports_for: PortsFactory,
    *,
    name: str = "clusters",
    timing: Timing | None = None,
    intensity: Intensity = ROOT_INTENSITY,
    children: Sequence[ChildFactory] = (),
    planners: Sequence[Planner] = PLANNERS,
) -> AsyncIterator[Fleet]:
    """A Fleet on a root supervisor of its own, for the life of the block.

    On exit the clusters' actors stop (members keep running: stopping them is the runtime
    owner's call) and then every cluster's ports are closed.
    """
    root = Supervisor(name, intensity=intensity)
    fleet = Fleet(root, ports_for, timing=timing, children=children, planners=planners)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(root.run)
            yield fleet
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await fleet.aclose()

"""The cluster actor: one per EtcdCluster. Observes, asks plan.py, executes one step.

Its mailbox carries spec changes, runtime events, member probes and health ticks, all
level-triggered and coalesced: any of them only means "look again". The actor keeps no
state that matters beyond the last probes; desired state comes from `desired()` and the
rest is read back from the runtime and etcd on every pass, so a restart loses nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Mapping
from functools import partial

import trio
from attrs import frozen

from actors.errors import EtcdError, MemberNotFound
from actors.member import MemberActor, MemberProbed, Probe
from actors.model import (
    ClusterRef,
    ClusterResource,
    ClusterStatus,
    Condition,
    MemberHealth,
    MemberLaunch,
    Phase,
    ProcessState,
    RuntimeMember,
)
from actors.plan import (
    Action,
    AddLearner,
    DeleteRuntimeMember,
    MoveLeader,
    Observed,
    PromoteLearner,
    RemoveMember,
    StartMember,
    StartSeed,
    Wait,
    assess,
    plan,
)
from actors.ports import EtcdAdmin, EventSink, MemberRuntime, StatusSink
from supervisor.runtime import (
    Actor,
    ChildSpec,
    Handle,
    Intensity,
    Reply,
    Strategy,
    Supervisor,
    actor_child,
)

log = logging.getLogger(__name__)


@frozen
class ClusterPorts:
    runtime: MemberRuntime
    admin: EtcdAdmin
    status: StatusSink
    events: EventSink


@frozen
class Timing:
    tick: float = 1.0  # health tick: probes, and a fresh look at everything
    # A member that just started is probed this often until it serves (at most one tick).
    eager_probe_interval: float = 0.1
    call_timeout: float = 5.0  # one etcd or runtime call
    probe_timeout: float = 1.0
    health_ttl: float = 3.0  # a probe older than this no longer counts


@frozen
class Desired:
    """What the user asked for, and what was wrong with their latest edit, if anything."""

    resource: ClusterResource
    problem: str | None = None  # an invalid edit keeps the last good spec, reported here


# --- messages -------------------------------------------------------------------------------


@frozen
class SpecChanged:
    pass


@frozen
class Tick:
    pass


@frozen
class RuntimeChanged:
    name: str


@frozen
class GetStatus:
    reply: Reply[ClusterStatus | None]


ClusterMessage = SpecChanged | Tick | RuntimeChanged | MemberProbed | GetStatus


def coalesce_key(msg: ClusterMessage) -> Hashable | None:
    match msg:
        case SpecChanged() | Tick():
            return "look-again"  # both mean the same: observe and decide afresh
        case RuntimeChanged(name=name):
            return ("runtime", name)  # also "look again", and probe this member eagerly
        case MemberProbed(name=name):
            return ("probe", name)  # only the latest answer per member matters
        case _:
            return None  # requests are never merged


class MemberActors:
    """The member actors of one cluster, under their own supervisor, kept in step with the runtime."""

    def __init__(self, cluster: ClusterRef, admin: EtcdAdmin, timing: Timing) -> None:
        self.supervisor = Supervisor(
            f"{cluster} members", strategy=Strategy.ONE_FOR_ONE, intensity=Intensity(20, 10.0)
        )
        self._admin = admin
        self._timing = timing
        self._handles: dict[str, Handle[Probe]] = {}

    async def sync(self, runtime: tuple[RuntimeMember, ...], report: Callable[[MemberProbed], None]) -> None:
        wanted = {r.name: r for r in runtime}
        running = set(self.supervisor.child_ids())
        for child_id in running - set(wanted):
            await self.supervisor.remove_child(child_id)
            self._handles.pop(child_id, None)
        for name in sorted(set(wanted) - running):
            member = wanted[name]
            spec, handle = actor_child(
                name,
                partial(
                    MemberActor,
                    name,
                    member.urls.client_url,
                    self._admin,
                    report,
                    probe_timeout=self._timing.probe_timeout,
                    eager_interval=self._timing.eager_probe_interval,
                    eager_window=self._timing.tick,
                ),
                mailbox_capacity=4,
                coalesce_key=lambda probe: ("probe", probe.eager),
                shutdown=1.0,
            )
            await self.supervisor.add_child(spec)
            self._handles[name] = handle
            self.probe(name, eager=True)  # a new member: its first answer is awaited

    def probe_all(self) -> None:
        for name in self.supervisor.child_ids():
            self.probe(name)

    def probe(self, name: str, *, eager: bool = False) -> None:
        handle = self._handles.get(name)
        if handle is not None:
            handle.send_nowait(Probe(eager))  # coalesced: never blocks, never piles up


class ClusterActor(Actor[ClusterMessage]):
    def __init__(
        self,
        ref: ClusterRef,
        desired: Callable[[], Desired],
        ports: ClusterPorts,
        timing: Timing,
        members: MemberActors,
    ) -> None:
        self.ref = ref
        self._desired = desired
        self._ports = ports
        self._timing = timing
        self._members = members
        self._health: dict[str, tuple[MemberHealth | None, float]] = {}
        self._phase: Phase | None = None
        self._status: ClusterStatus | None = None
        # After a refused step, hold off (doubling each time) instead of retrying in a tight
        # loop: etcd may refuse a step for seconds (a promotion of a lagging learner, say).
        self._failures = 0
        self._hold_until = float("-inf")

    async def on_start(self) -> None:
        self._look_again()

    def _report_probe(self, probed: MemberProbed) -> None:
        nudge(self.handle_ref, probed)

    def _look_again(self) -> None:
        nudge(self.handle_ref, Tick())

    async def handle(self, msg: ClusterMessage) -> None:
        match msg:
            case GetStatus(reply=reply):
                reply.set(self._status)
                return
            case MemberProbed(name=name, health=health):
                self._health[name] = (health, trio.current_time())
            case Tick():
                self._members.probe_all()
            case RuntimeChanged(name=name):
                self._members.probe(name, eager=True)  # started, ready or exited: ask it now
        await self.reconcile()

    async def reconcile(self) -> None:
        desired = self._desired()
        spec = desired.resource.spec
        observed = await self._observe()
        step = plan(self.ref, spec, observed)
        await self._publish(desired, observed, step)
        await self._members.sync(observed.runtime, self._report_probe)
        if step is None or isinstance(step, Wait) or trio.current_time() < self._hold_until:
            return
        log.info(
            "cluster %s: %s",
            self.ref,
            step,
            extra={"event": "action", "cluster": str(self.ref), "action": type(step).__name__},
        )
        try:
            with trio.fail_after(self._timing.call_timeout * 3):
                await self._execute(step, observed, desired.resource)
        except (EtcdError, trio.TooSlowError) as exc:
            # Refused or unreachable: observe again later and decide afresh.
            self._failures += 1
            # Once a tick at first (etcd's own refusals, like a learner not caught up yet,
            # clear within seconds), then doubling up to 16 ticks.
            hold = self._timing.tick * min(2 ** max(0, self._failures - 5), 16)
            self._hold_until = trio.current_time() + hold
            log.warning(
                "cluster %s: %s failed (holding off %.1fs): %r", self.ref, type(step).__name__, hold, exc
            )
            await self._ports.events.record(
                self.ref, reason=f"{type(step).__name__}Failed", message=f"{step}: {exc!r}", warning=True
            )
            return
        self._failures = 0
        await self._ports.events.record(self.ref, reason=_event_reason(step), message=_describe(step))
        self._look_again()  # the next step may be ready now; don't wait for the tick

    async def _observe(self) -> Observed:
        runtime = tuple(await self._ports.runtime.list_members(self.ref))
        now = trio.current_time()
        names = {r.name for r in runtime}
        health = {
            name: h
            for name, (h, at) in self._health.items()
            if name in names and now - at <= self._timing.health_ttl
        }
        self._health = {n: v for n, v in self._health.items() if n in names}
        etcd_members = None
        endpoints = _endpoints(runtime, health)
        if endpoints:
            with trio.move_on_after(self._timing.call_timeout):
                try:
                    etcd_members = tuple(await self._ports.admin.member_list(endpoints))
                except EtcdError:
                    etcd_members = None
        return Observed(runtime, etcd_members, health)

    async def _publish(self, desired: Desired, observed: Observed, step: Action | Wait | None) -> None:
        status = assess(
            desired.resource.spec,
            observed,
            previous=self._phase,
            generation=desired.resource.generation,
            step=step,
            now=_wall_clock(),
            previous_conditions=self._status.conditions if self._status else (),
        )
        if desired.problem:
            status = _with_invalid_spec(status, desired.problem)
        if self._phase is not None and status.phase is not self._phase:
            await self._ports.events.record(
                self.ref,
                reason=f"Phase{status.phase.value}",
                message=f"{self._phase.value} -> {status.phase.value}: {status.message}",
                warning=status.phase is Phase.FAILED,
            )
        self._phase = status.phase
        if status != self._status:
            self._status = status
            await self._ports.status.publish(self.ref, status)

    async def _execute(self, step: Action, observed: Observed, resource: ClusterResource) -> None:
        runtime, admin = self._ports.runtime, self._ports.admin
        by_name = observed.runtime_by_name()
        endpoints = _endpoints(observed.runtime, observed.health)
        match step:
            case StartSeed(name=name):
                urls = await runtime.allocate_member(self.ref, name)
                launch = MemberLaunch(self.ref, name, urls, ((name, urls.peer_url),), "new", resource.spec)
                await runtime.start_member(launch)
            case StartMember(name=name, initial_cluster=initial):
                urls = by_name[name].urls
                launch = MemberLaunch(
                    self.ref, name, urls, initial or ((name, urls.peer_url),), "existing", resource.spec
                )
                await runtime.start_member(launch)
            case AddLearner(name=name):
                # Addresses first, so etcd never lists a peer URL the runtime cannot serve.
                urls = await runtime.allocate_member(self.ref, name)
                try:
                    await admin.add_learner(endpoints, urls.peer_url)
                except EtcdError:
                    # Give the addresses back; if etcd did add it after all, plan removes the
                    # learner that has no runtime member.
                    await runtime.delete_member(self.ref, name)
                    raise
            case PromoteLearner(member_id=member_id):
                await admin.promote(endpoints, member_id)
            case MoveLeader(to_id=to_id):
                await admin.move_leader(endpoints, to_id)
            case RemoveMember(member_id=member_id, name=name):
                try:
                    await admin.remove(endpoints, member_id)
                except MemberNotFound:
                    pass  # removed already, by an earlier incarnation of this actor
                if name:
                    await runtime.delete_member(self.ref, name)
            case DeleteRuntimeMember(name=name):
                await runtime.delete_member(self.ref, name)


def _endpoints(runtime: tuple[RuntimeMember, ...], health: Mapping[str, MemberHealth | None]) -> list[str]:
    """Client URLs to aim etcd calls at: the leader first, then voters, then the rest."""

    def rank(r: RuntimeMember) -> tuple[int, str]:
        h = health.get(r.name)
        if h is None:
            return (3, r.name)
        if h.member_id == h.leader_id:
            return (0, r.name)
        return (2 if h.is_learner else 1, r.name)

    live = [r for r in runtime if r.state in (ProcessState.RUNNING, ProcessState.STARTING)]
    return [r.urls.client_url for r in sorted(live, key=rank)]


def _with_invalid_spec(status: ClusterStatus, problem: str) -> ClusterStatus:
    conditions = tuple(
        Condition("Degraded", "True", "InvalidSpec", problem, c.last_transition_time)
        if c.type == "Degraded"
        else c
        for c in status.conditions
    )
    return ClusterStatus(
        phase=status.phase,
        ready_replicas=status.ready_replicas,
        observed_generation=status.observed_generation,
        members=status.members,
        conditions=conditions,
        message=f"latest spec rejected, still serving the previous one: {problem}",
    )


def _event_reason(step: Action) -> str:
    return {
        StartSeed: "SeedStarted",
        StartMember: "MemberStarted",
        AddLearner: "LearnerAdded",
        PromoteLearner: "LearnerPromoted",
        MoveLeader: "LeaderMoved",
        RemoveMember: "MemberRemoved",
        DeleteRuntimeMember: "MemberDeleted",
    }[type(step)]


def _describe(step: Action) -> str:
    match step:
        case StartSeed(name=name):
            return f"started seed member {name}"
        case StartMember(name=name, reason=reason):
            return f"started member {name}: {reason}"
        case AddLearner(name=name):
            return f"added learner {name}"
        case PromoteLearner(name=name):
            return f"promoted learner {name} to voting member"
        case MoveLeader(to_name=name, reason=reason):
            return f"moved leadership to {name}: {reason}"
        case RemoveMember(name=name, member_id=member_id, reason=reason):
            return f"removed member {name} ({member_id:x}): {reason}"
        case DeleteRuntimeMember(name=name, reason=reason):
            return f"deleted {name}: {reason}"
    return str(step)


def _wall_clock() -> float:
    # Condition timestamps are for people: wall time, not trio's clock.
    return time.time()


def nudge(handle: Handle[ClusterMessage], msg: ClusterMessage) -> None:
    """Deliver an observation without ever blocking the caller (a watch, a probe, a timer)."""
    try:
        handle.send_nowait(msg)
    except (trio.WouldBlock, trio.ClosedResourceError):
        pass  # a full mailbox already holds a look-again; a closed one has no reader


async def forward_runtime_changes(
    runtime: MemberRuntime,
    ref: ClusterRef,
    handle: Handle[ClusterMessage],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Runtime events into the cluster's mailbox, subscribed for exactly as long as this runs.

    A child of its own, not part of the actor, so a crashing actor cannot leak subscriptions.
    """
    unwatch = runtime.watch_members(ref, lambda name: nudge(handle, RuntimeChanged(name)))
    try:
        task_status.started()
        await trio.sleep_forever()
    finally:
        unwatch()


async def run_ticker(
    handle: Handle[ClusterMessage],
    interval: float,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Health ticks: coalesced, so a slow actor gets one pending tick, never a backlog."""
    task_status.started()
    while True:
        await trio.sleep(interval)
        nudge(handle, Tick())


def cluster_tree(
    ref: ClusterRef, desired: Callable[[], Desired], ports: ClusterPorts, timing: Timing
) -> tuple[Supervisor, Handle[ClusterMessage]]:
    """The supervision tree of one cluster: member actors, the cluster actor, its ticker.

    rest_for_one: the cluster actor depends on the member supervisor (it adds and removes
    member actors), so a crash restarts what comes after; the runtime-event forwarder and the
    ticker only feed the mailbox, which outlives every incarnation of the actor.
    """
    members = MemberActors(ref, ports.admin, timing)
    actor_spec, handle = actor_child(
        "cluster",
        lambda: ClusterActor(ref, desired, ports, timing, members),
        mailbox_capacity=64,
        coalesce_key=coalesce_key,
        shutdown=timing.call_timeout,
    )
    tree = Supervisor(
        f"cluster {ref}",
        [
            ChildSpec("members", members.supervisor.run, shutdown=2.0),  # type: ignore[arg-type]
            ChildSpec(
                "runtime-events", partial(forward_runtime_changes, ports.runtime, ref, handle), shutdown=0.1
            ),
            actor_spec,
            ChildSpec("ticker", partial(run_ticker, handle, timing.tick), shutdown=0.1),
        ],
        strategy=Strategy.REST_FOR_ONE,
        intensity=Intensity(10, 30.0),
    )
    return tree, handle

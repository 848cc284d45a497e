"""The cluster actor: one per EtcdCluster. Folds messages into facts, asks the plan, executes.

Its mailbox carries spec changes, runtime events, member probes and health ticks, all
level-triggered and coalesced. `handle` only folds a message into what the actor knows;
`on_drained` (once the mailbox is empty) observes what is stale, asks plan.py for the next
step, publishes the status and the `Observed` it acted on, and executes the step. The actor
keeps no decisions of its own (those are the planners', assess()'s and HoldOff's) and no state
that matters beyond the last probes: desired state comes from `desired()` and the rest is
read back from the runtime and etcd, so a restart loses nothing.

What is read when: the runtime's members and etcd's member list on a tick, a runtime event,
a spec change or after a step (one list_members and one member_list); probe answers alone
replan on those facts without calling anything.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from functools import partial
from typing import TypeVar

import attrs
import trio

from actors import foreign_members
from actors.actions import (
    Action,
    ActionContext,
    MemberJoined,
    Outcome,
    QuorumRecovered,
    RestartedForSilence,
    Step,
    VanishedFromEtcd,
)
from actors.assess import assess, new_warning, too_soon_to_tell
from actors.ca_rotation import rotating
from actors.cluster_context import (
    ChildFactory,
    ClusterContext,
    ClusterMessage,
    Desired,
    GetStatus,
    LookAgain,
    ObservedFeed,
    RuntimeChanged,
    ServiceReports,
    ServicesReported,
    SpecChanged,
    Tick,
    Timing,
    nudge,
)
from actors.errors import EtcdError, NamespaceTerminating, StepFailed
from actors.holdoff import HoldOff
from actors.maintenance.revisions import periodic_retention_seconds
from actors.member import MemberActor, MemberProbed, Probe
from actors.member_times import MemberTimes, Vanishings
from actors.model import (
    AdoptSpec,
    ClusterRef,
    ClusterSpec,
    ClusterStatus,
    EtcdMember,
    LastBackup,
    LastRecovery,
    MemberConfig,
    MemberHealth,
    OldAuth,
    Phase,
    RuntimeMember,
)
from actors.observed import Observed
from actors.plan import PLANNERS, Planner, plan
from actors.plan.adoption import not_begun
from actors.ports import ClusterPorts, MemberRuntime
from actors.probe_book import ProbeBook
from supervisor.backoff import Backoff
from supervisor.runtime import (
    Actor,
    ChildSpec,
    Handle,
    Intensity,
    Strategy,
    Supervisor,
    actor_child,
)

log = logging.getLogger(__name__)


def coalesce_key(msg: ClusterMessage) -> Hashable | None:
    match msg:
        case SpecChanged() | LookAgain():
            return "look-again"  # both mean the same: observe and decide afresh
        case Tick():
            return "tick"  # look again and probe every member
        case ServicesReported():
            return "services"
        case RuntimeChanged(name=name):
            return ("runtime", name)  # look again, and probe this member eagerly
        case MemberProbed(name=name):
            return ("probe", name)  # only the latest answer per member matters
        case _:
            return None  # requests are never merged


class MemberActors:
    """The member actors of one cluster, under their own supervisor, kept in step with the runtime."""

    def __init__(self, cluster: ClusterRef, ports: ClusterPorts, timing: Timing) -> None:
        self.supervisor = Supervisor(
            f"{cluster} members", strategy=Strategy.ONE_FOR_ONE, intensity=Intensity(20, 10.0), kind="members"
        )
        self._admin = ports.admin
        self._timing = timing
        self._handles: dict[str, Handle[Probe]] = {}

    async def sync(self, runtime: tuple[RuntimeMember, ...], report: Callable[[MemberProbed], None]) -> None:
        wanted = {r.name: r for r in runtime}
        running = set(self.supervisor.child_ids())
        for child_id in running - set(wanted):
            await self.supervisor.remove_child(child_id)
            self._handles.pop(child_id, None)
        for name in sorted(set(wanted) - running):
            await self._add(name, wanted[name].urls.client_url, report)

    async def _add(self, name: str, client_url: str, report: Callable[[MemberProbed], None]) -> None:
        timing = self._timing
        spec, handle = actor_child(
            name,
            partial(
                MemberActor,
                name,
                client_url,
                self._admin,
                report,
                probe_timeout=timing.probe_timeout,
                eager_interval=timing.eager_probe_interval,
                eager_window=timing.eager_window,
            ),
            mailbox_capacity=4,
            coalesce_key=lambda probe: ("probe", probe.eager),
            shutdown=1.0,
            kind="member",
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
        feed: ObservedFeed,
        planners: Sequence[Planner] = PLANNERS,
        reports: ServiceReports | None = None,
    ) -> None:
        self.ref = ref
        self._desired = desired
        self._ports = ports
        self._timing = timing
        self._members = members
        self._feed = feed
        self._planners = planners
        self._reports = reports or ServiceReports()
        self._book = ProbeBook()
        self._runtime: tuple[RuntimeMember, ...] = ()
        self._membership: tuple[EtcdMember, ...] | None = None
        # spec.adopt: the old members last seen (where to ask when ours do not answer), and
        # their health.
        self._foreign_seen: tuple[EtcdMember, ...] = ()
        self._foreign: dict[int, MemberHealth | None] = {}
        self._old_auth: OldAuth | None = None  # asked only before a member of ours exists
        self._membership_error = ""  # why the last membership read failed ("" when it did not)
        self._stale = True  # runtime and membership must be read again before deciding
        self._dirty = False  # something changed since the last decision
        self._status: ClusterStatus | None = None
        self._holdoff = HoldOff()
        self._times = MemberTimes()
        self._vanishings = Vanishings()
        self._step_started_at = -math.inf
        # Why a step that fails the cluster (a restore) failed last; cleared by any success.
        self._failure: str | None = None
        # The namespace is being deleted (a step was refused so): nothing can be made in it any
        # more, so no step is taken until the cluster goes; the status says why.
        self._going_away = False
        # The latest recovery, for the status. Memory: the Events keep every recovery.
        self._last_recovery: LastRecovery | None = None
        # Hibernated and not served since (a daemon started over a hibernated cluster knows it
        # from the status on record): waking, a cluster whose data is gone comes from its backup.
        self._asleep = desired().resource.recorded_phase == Phase.HIBERNATED.value

    async def on_start(self) -> None:
        nudge(self.handle_ref, LookAgain())

    async def handle(self, msg: ClusterMessage) -> None:
        match msg:
            case GetStatus(reply=reply):
                reply.set(self._status)
                return
            case MemberProbed(name=name, health=health, asked_at=asked_at):
                if not self._fold_probe(name, health, asked_at):
                    return  # the same picture as before: the next tick looks again anyway
            case Tick():
                self._stale = True
                self._members.probe_all()
            case RuntimeChanged(name=name):
                self._stale = True
                self._members.probe(name, eager=True)  # started, ready or exited: ask it now
            case SpecChanged() | LookAgain():
                self._stale = True
            case ServicesReported():
                pass  # assess again with what they reported; the world is as it was
        self._dirty = True

    def _fold_probe(self, name: str, health: MemberHealth | None, asked_at: float) -> bool:
        """Record a probe's answer; True when it changes what the plan or the status reads."""
        if self._book.superseded(name, asked_at):
            return False  # an eager probe's answer already came in, asked later than this one
        now = trio.current_time()
        if health is not None:
            self._times.answered(name, now)
        self._book, changed = self._book.fold(
            name,
            health,
            asked_at,
            now=now,
            answers_from=self._times.answers_from(name),
            window=periodic_retention_seconds(self._desired().resource.spec.maintenance),
        )
        return changed

    async def on_drained(self) -> None:
        if self._dirty:
            self._dirty = False
            await self.reconcile()

    def _member_config(self, spec: ClusterSpec) -> MemberConfig:
        """The runtime's configuration for the spec, with the trust material the certificate
        child last read (members started with other material are rolled: a CA rotation)."""
        config = self._ports.runtime.member_config(spec)
        report = self._reports.tls
        if report is None or report.state is None or not spec.tls_enabled:
            return config
        return attrs.evolve(config, trust=report.state.trust, rotating_ca=rotating(report.state))

    async def reconcile(self) -> None:
        desired = self._desired()
        spec = desired.resource.spec
        observed = attrs.evolve(await self._observe(), desired=self._member_config(spec))
        # A member new to the runtime is probed from now on: the next step of a bootstrap
        # waits on its first answer.
        await self._members.sync(observed.runtime, partial(nudge, self.handle_ref))
        step = plan(spec, observed, self._planners)
        status = self._assess(desired, observed, step)
        if status is not None and status.phase is Phase.HIBERNATED:
            self._asleep = True
        elif observed.has_quorum() and not spec.hibernate:
            self._asleep = False
        if not spec.hibernate:
            self._reports.final_backup = None  # awake: a next hibernation takes a backup of its own
        publish = partial(self._publish, status)
        self._feed.publish(observed)
        # Suspended (etcd.io/suspend): observed and reported, the step only named as held.
        held = desired.resource.suspended
        if (
            held
            or self._going_away
            or not (isinstance(step, Action) and self._holdoff.allows(trio.current_time()))
        ):
            await publish()
            return
        ports = self._ports
        ctx = ActionContext(
            spec,
            observed,
            ports.runtime,
            ports.admin,
            ports.restorer,
            self._reports.maintenance,
            ports.events,
            trio.sleep,
            clock=trio.current_time,
            wall_clock=time.time,
        )
        # The status saying what is being done is written while it is done: a bootstrap is a
        # chain of steps, each waiting on the last, and would otherwise wait on every write.
        await alongside(publish, partial(self._execute, step, ctx))

    async def _observe(self) -> Observed:
        adopt = self._desired().resource.spec.adopt
        now = trio.current_time()
        health = self._fresh_health()
        answering = any(h is not None for h in health.values())
        if self._stale:
            self._runtime = tuple(await self._ports.runtime.list_members(self.ref))
            now = trio.current_time()
            self._times.seen(self._runtime, now)
            health = self._fresh_health()
        if self._stale or (self._membership is None and answering):
            partial_view = Observed(self.ref, self._runtime, None, health)
            endpoints = partial_view.endpoints() + foreign_members.lookup_endpoints(adopt, self._foreign_seen)
            self._membership = await self._member_list(endpoints)
            await self._probe_foreign(adopt)
            await self._ask_old_auth(endpoints)
        self._stale = False
        return Observed(
            self.ref,
            self._runtime,
            self._membership,
            health,
            silent_for=self._times.silent_for(now),
            stopped_for=self._times.stopped_for(now),
            unplaced_for=self._times.unplaced_for(now),
            restarted_silent=self._times.restarted_silent(),
            vanished=self._vanishings.facts(now),
            maintenance=self._reports.maintenance.round,
            unreachable_for=self._times.unreachable_for(now),
            answered_before_step=self._book.answered_before_step(health),
            unprobed=self._book.unprobed(r.name for r in self._runtime),
            revision_seen=self._book.revision_seen,
            revision_ages=self._book.revisions.ages(now),
            newest_verified_backup=self._newest_verified_backup(),
            deltas_reach=self._reports.deltas_reach,
            had_members=self._book.revision_seen > 0 or bool(self._desired().resource.recorded_members),
            final_backup=self._reports.final_backup,
            hibernated=self._asleep,
            foreign=self._foreign,
            membership_error=self._membership_error,
            adopt_auth=self._old_auth,
        )

    async def _probe_foreign(self, adopt: AdoptSpec | None) -> None:
        """An adopting cluster's old members and their health (they have no member actor)."""
        if adopt is None:
            return  # no checkpoint: a cluster of our own observes with the awaits it always had
        old = foreign_members.unowned(self._runtime, self._membership)
        if old or self._membership is not None:
            self._foreign_seen = tuple(old)
        self._foreign = await foreign_members.probe(self._ports.admin, old, self._timing.call_timeout)

    async def _ask_old_auth(self, endpoints: list[str]) -> None:
        """Before the first member of ours, whether the cluster to adopt has auth on: one
        AuthStatus (a raft request) per look, none once the adoption began."""
        self._old_auth = None
        if not_begun(self._desired().resource.spec, self._runtime):
            self._old_auth = await foreign_members.ask_auth(
                self._ports.admin, endpoints, self._timing.call_timeout
            )

    def _newest_verified_backup(self) -> LastBackup | None:
        report = self._reports.backup
        last = report.status.last_successful_backup if report else None
        return last if last is not None and last.verified else None

    def _fresh_health(self) -> dict[str, MemberHealth | None]:
        """Probe answers young enough to count, and given by the member's current process."""
        self._book = self._book.only(r.name for r in self._runtime)
        return self._book.fresh(trio.current_time(), self._timing.health_ttl, self._times.answers_from)

    async def _member_list(self, endpoints: list[str]) -> tuple[EtcdMember, ...] | None:
        if not endpoints:
            return None
        self._membership_error = f"no answer in {self._timing.call_timeout:g}s"
        with trio.move_on_after(self._timing.call_timeout):
            try:
                members = tuple(await self._ports.admin.member_list(endpoints))
                self._membership_error = ""
                return members
            except EtcdError as e:
                self._membership_error = str(e)
        return None

    def _assess(self, desired: Desired, observed: Observed, step: Step | None) -> ClusterStatus | None:
        """The status to publish; None while it is too soon to tell (the one on record stands)."""
        previous = self._status
        if too_soon_to_tell(previous.phase if previous else None, observed):
            return None
        return assess(
            desired.resource.spec,
            observed,
            previous=previous.phase if previous else None,
            generation=desired.resource.generation,
            step=step,
            now=time.time(),  # condition timestamps are for people: wall time, not trio's clock
            previous_conditions=previous.conditions if previous else (),
            previous_version=previous.version if previous else "",
            problem=desired.problem,
            backup=self._reports.backup_report(),
            failure=self._failure,
            last_recovery=self._last_recovery,
            tls=self._reports.tls,
            suspended=desired.resource.suspended,
        )

    async def _publish(self, status: ClusterStatus | None) -> None:
        previous = self._status
        if status is None:
            return
        if previous is not None and status.phase is not previous.phase:
            await self._ports.events.record(
                self.ref,
                reason=f"Phase{status.phase.value}",
                message=f"{previous.phase.value} -> {status.phase.value}: {status.message}",
                warning=status.phase is Phase.FAILED,
            )
        if (unplaced := new_warning(previous, status)) is not None:
            await self._ports.events.record(
                self.ref, reason=unplaced.reason, message=unplaced.message, warning=True
            )
        if status != previous:
            self._status = status
            await self._ports.status.publish(self.ref, status)

    async def _execute(self, step: Action, ctx: ActionContext) -> None:
        name = type(step).__name__
        extra = {"event": "action", "cluster": str(self.ref), "action": name}
        log.info("cluster %s: %s", self.ref, step, extra=extra)
        self._step_started_at = trio.current_time()
        result = await self._attempt(step, ctx)
        self._after_step()
        if isinstance(result, NamespaceTerminating):
            self._stop_steps(name, result)
        elif isinstance(result, Exception):
            await self._hold_off_after(step, result)
        else:
            await self._succeeded(step, result)

    async def _attempt(self, step: Action, ctx: ActionContext) -> Outcome | Exception:
        """Run the step within its time limit: how it went, or why it did not."""
        try:
            with trio.fail_after(step.time_limit or self._timing.call_timeout * 3):
                return await step.execute(ctx)
        except (EtcdError, StepFailed, trio.TooSlowError) as exc:  # NamespaceTerminating among them
            return exc

    def _stop_steps(self, name: str, refusal: NamespaceTerminating) -> None:
        self._going_away = True
        self._failure = f"its namespace is being deleted: no more steps ({name} refused)"
        # No warning Event: the API server takes none in this namespace.
        log.info("cluster %s: %s refused, its namespace is being deleted: %s", self.ref, name, refusal)

    async def _hold_off_after(self, step: Action, exc: Exception) -> None:
        """Refused, unreachable or failed: observe again later and decide afresh."""
        self._holdoff = self._holdoff.refused(trio.current_time(), self._timing.tick)
        self._stale = True  # the step may have half-happened
        self._failure = f"{step.progress()} failed: {exc}" if step.failure_fails_cluster else None
        log.warning("cluster %s: %s failed (holding off): %r", self.ref, type(step).__name__, exc)
        await self._ports.events.record(
            self.ref, reason=step.failure_reason, message=f"{step}: {exc!r}", warning=True
        )

    async def _succeeded(self, step: Action, outcome: Outcome) -> None:
        self._holdoff = HoldOff()
        self._failure = None
        match outcome.remember:
            case RestartedForSilence(name=name):
                self._times.restarted_for_silence(name)  # silent again after this: replace it
            case VanishedFromEtcd(name=name):
                self._vanishings.vanished(name, trio.current_time())
            case MemberJoined():
                self._vanishings.joined()
            case QuorumRecovered(recovery=recovery):
                self._last_recovery = recovery
                self._book = self._book.recovered(recovery.revision)
        await self._ports.events.record(
            self.ref, reason=step.event_reason, message=outcome.description, measured=outcome.measured
        )
        nudge(self.handle_ref, LookAgain())  # the next step may be ready now; don't wait for the tick

    def _after_step(self) -> None:
        """Ask every member afresh: what the next step reads must postdate this one. Not
        eagerly: an eager probe reports only once its member serves, and the others' answers
        are wanted now (a restarted member's runtime event asks it eagerly)."""
        self._book = self._book.step_ran(self._step_started_at, trio.current_time())
        self._members.probe_all()


T = TypeVar("T")


async def alongside(side: Callable[[], Awaitable[None]], main: Callable[[], Awaitable[T]]) -> T:
    """`main()`'s result, with `side()` run beside it. A failure of `side` is raised once `main`
    is done, never cancelling it half-way (a step half-done is worse than a report late); a
    failure of `main` is raised as it is, and cancels `side`."""
    side_failed: list[Exception] = []
    main_failed: list[Exception] = []

    async def guarded_side() -> None:
        try:
            await side()
        except Exception as exc:
            side_failed.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(guarded_side)
        try:
            result = await main()
        except Exception as exc:
            main_failed.append(exc)
            nursery.cancel_scope.cancel()
    if main_failed or side_failed:
        raise (main_failed or side_failed)[0]
    return result


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


# A per-cluster service (backups, defragmentation) that keeps crashing is retried at most once
# a minute and never escalates: with these delays its supervisor cannot see ten restarts in a
# minute, so a broken service never restarts the members and the cluster actor beside it.
SERVICE_BACKOFF = Backoff(initial=1.0, maximum=60.0)


def cluster_tree(
    ref: ClusterRef,
    desired: Callable[[], Desired],
    ports: ClusterPorts,
    timing: Timing,
    *,
    children: Sequence[ChildFactory] = (),
    planners: Sequence[Planner] = PLANNERS,
) -> tuple[Supervisor, Handle[ClusterMessage]]:
    """The supervision tree of one cluster.

    rest_for_one, in order: the per-cluster children (under a one_for_one supervisor of their
    own, so that one failing restarts only itself), the member actors, the runtime-event
    forwarder, the cluster actor (which adds and removes member actors, so it comes after
    them) and its ticker. The mailbox and the feed outlive every incarnation of the actor.
    """
    feed, reports = ObservedFeed(), ServiceReports()
    members = MemberActors(ref, ports, timing)
    actor_spec, handle = actor_child(
        "cluster",
        lambda: ClusterActor(ref, desired, ports, timing, members, feed, planners, reports),
        mailbox_capacity=64,
        coalesce_key=coalesce_key,
        shutdown=timing.call_timeout,
    )
    context = ClusterContext(ref, desired, ports, timing, feed, handle, reports)
    order: list[ChildSpec] = []
    if children:
        services = Supervisor(
            f"{ref} services",
            [factory(context) for factory in children],
            strategy=Strategy.ONE_FOR_ONE,
            intensity=Intensity(10, 60.0),
            backoff=SERVICE_BACKOFF,
            kind="services",
        )
        order.append(ChildSpec("services", services.run, shutdown=timing.call_timeout))  # type: ignore[arg-type]
    order += [
        ChildSpec("members", members.supervisor.run, shutdown=2.0),  # type: ignore[arg-type]
        ChildSpec(
            "runtime-events", partial(forward_runtime_changes, ports.runtime, ref, handle), shutdown=0.1
        ),
        actor_spec,
        ChildSpec("ticker", partial(run_ticker, handle, timing.tick), shutdown=0.1),
    ]
    tree = Supervisor(
        f"cluster {ref}", order, strategy=Strategy.REST_FOR_ONE, intensity=Intensity(10, 30.0), kind="cluster"
    )
    return tree, handle

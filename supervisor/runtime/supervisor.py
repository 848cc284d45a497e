"""An OTP-style supervisor on trio: ordered children, restart strategies, intensity, escalation.

Every child runs in its own task inside the supervisor's nursery, under a *shielded* per-child
cancel scope. The shield is what lets the supervisor, when it is itself cancelled, stop its
children one at a time in reverse start order with a grace period each, instead of trio
cancelling them all at once.
"""

from __future__ import annotations

import logging
import math
import random
from collections import deque
from collections.abc import Sequence
from typing import Any

import attrs
import trio

from supervisor.backoff import Backoff
from supervisor.runtime import telemetry
from supervisor.runtime.errors import SupervisorEscalation
from supervisor.runtime.policy import Intensity, Restart, Strategy
from supervisor.runtime.shutdown import ChildContext, current_child, open_cleanup_scope
from supervisor.runtime.spec import ChildSpec
from supervisor.runtime.stats import ChildStatistics, SupervisorStatistics

log = logging.getLogger(__name__)

_DEFAULT_INTENSITY = Intensity()
_DEFAULT_BACKOFF = Backoff()


@attrs.define(eq=False)
class _Run:
    """One incarnation of a child."""

    scope: trio.CancelScope = attrs.Factory(lambda: trio.CancelScope(shield=True))
    ctx: ChildContext = attrs.Factory(ChildContext)
    settled: trio.Event = attrs.Factory(trio.Event)  # ready, or exited before that
    done: trio.Event = attrs.Factory(trio.Event)
    ready: bool = False
    ready_at: float = 0.0
    stopping: bool = False  # the supervisor asked it to stop: its exit is not a failure
    exited: bool = False
    error: BaseException | None = None


@attrs.define(eq=False)
class _Child:
    spec: ChildSpec
    run: _Run | None = None
    restarts: int = 0
    last_failure: str | None = None
    attempt: int = 0  # consecutive restarts, for the backoff

    @property
    def alive(self) -> bool:
        return self.run is not None and not self.run.exited


class _ChildStatus:
    """The task_status a child reports readiness through (a trio.TaskStatus look-alike).

    Children are spawned with start_soon rather than nursery.start so that a child is never
    left half-moved between nurseries when the supervisor is cancelled mid-start.
    """

    __slots__ = ("_run",)

    def __init__(self, run: _Run) -> None:
        self._run = run

    def started(self, value: Any = None) -> None:
        run = self._run
        if run.ready:
            raise RuntimeError("called 'started' twice on the same task status")
        run.ready = True
        run.ready_at = trio.current_time()
        run.settled.set()


def _should_restart(restart: Restart, failure: BaseException | None) -> bool:
    if restart is Restart.PERMANENT:
        return True
    if restart is Restart.TRANSIENT:
        return failure is not None
    return False


class Supervisor:
    """Starts `children` in order, restarts them by `strategy`, and gives up (escalates) when
    more than `intensity.max_restarts` restarts happen within `intensity.within` seconds.

    Each `run` starts from the static `children`; dynamic children added with `add_child`
    die with the run, to be rebuilt by whoever owns the desired state.
    """

    def __init__(
        self,
        name: str,
        children: Sequence[ChildSpec] = (),
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        intensity: Intensity = _DEFAULT_INTENSITY,
        backoff: Backoff = _DEFAULT_BACKOFF,
        rng: random.Random | None = None,
        kind: str | None = None,
    ) -> None:
        ids = [spec.id for spec in children]
        if len(set(ids)) != len(ids):
            raise ValueError(f"supervisor {name!r}: duplicate child ids in {ids}")
        self.name = name
        self.kind = kind or name  # bounded, for telemetry: "cluster", not "cluster default/demo"
        self.strategy = strategy
        self.intensity = intensity
        self.backoff = backoff
        self._rng = rng if rng is not None else random.Random()
        self._specs = tuple(children)
        self._children: list[_Child] = [_Child(spec) for spec in self._specs]
        self._restarts_total = 0
        self._restart_times: deque[float] = deque()
        self._nursery: trio.Nursery | None = None
        self._lock = trio.Lock()
        self._running = False
        self._closing = False
        self._exits_send: trio.MemorySendChannel[tuple[_Child, _Run]] | None = None

    def __repr__(self) -> str:
        return f"Supervisor({self.name!r})"

    # ---- public API -------------------------------------------------------------------

    # task_status is positional-or-keyword so `ChildSpec(id, sup.run)` type-checks against
    # ChildSpec.start; nursery.start and the supervisor both pass it by keyword.
    async def run(self, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the children in order, report started(self), then supervise until cancelled.

        Raises SupervisorEscalation when the intensity is exceeded, or a child's exception if
        it fails during the initial start; either way after stopping every child.
        """
        if self._running:
            raise RuntimeError(f"supervisor {self.name!r} is already running")
        self._running = True
        self._closing = False
        self._children = [_Child(spec) for spec in self._specs]
        self._restart_times.clear()
        send, receive = trio.open_memory_channel[tuple[_Child, _Run]](math.inf)
        self._exits_send = send
        failure: BaseException | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    for child in list(self._children):
                        error = await self._start(child)
                        if error is not None:
                            log.error(
                                "supervisor %s: child %s failed to start: %r",
                                self.name,
                                child.spec.id,
                                error,
                                extra=self._extra("crash", child, error),
                            )
                            failure = error
                            break
                    else:
                        task_status.started(self)
                        failure = await self._supervise(receive)
                finally:
                    self._closing = True
                    # The parent's hard cancel reaches this cleanup; the children's own shutdown
                    # timeouts bound it otherwise.
                    with open_cleanup_scope():
                        await self._stop_all()
        finally:
            self._running = False
            self._nursery = None
            self._exits_send = None
        # Raised outside the nursery so the parent sees the exception itself, not a group.
        if failure is not None:
            raise failure

    async def add_child(self, spec: ChildSpec) -> None:
        """Start a child after the existing ones and wait until it reports readiness.

        ValueError on a duplicate id; the child's own exception if it fails to start.
        """
        async with self._lock:
            if self._nursery is None or self._closing:
                raise RuntimeError(f"supervisor {self.name!r} is not running")
            if any(c.spec.id == spec.id for c in self._children):
                raise ValueError(f"supervisor {self.name!r} already has a child {spec.id!r}")
            child = _Child(spec)
            self._children.append(child)
            error = await self._start(child)
            if error is not None:
                if child in self._children:
                    self._children.remove(child)
                raise error

    async def remove_child(self, id: str) -> None:
        """Stop the child (shutdown grace, then hard cancel) and forget it; it is not restarted."""
        async with self._lock:
            child = self._find(id)
            if child is None:
                raise KeyError(id)
            self._children.remove(child)
            await self._stop_child(child)

    def child_ids(self) -> tuple[str, ...]:
        return tuple(c.spec.id for c in self._children)

    def statistics(self) -> SupervisorStatistics:
        return SupervisorStatistics(
            name=self.name,
            strategy=self.strategy,
            restarts_total=self._restarts_total,
            children=tuple(
                ChildStatistics(
                    id=c.spec.id,
                    running=c.run is not None and c.run.ready and not c.run.exited,
                    restarts=c.restarts,
                    last_failure=c.last_failure,
                )
                for c in self._children
            ),
        )

    # ---- internals --------------------------------------------------------------------

    def _find(self, id: str) -> _Child | None:
        for child in self._children:
            if child.spec.id == id:
                return child
        return None

    def _extra(self, event: str, child: _Child, error: BaseException | None = None) -> dict[str, Any]:
        return {
            "event": event,
            "supervisor": self.name,
            "child": child.spec.id,
            "restarts": child.restarts,
            "error": None if error is None else repr(error),
        }

    async def _child_main(self, child: _Child, run: _Run) -> None:
        current_child.set(run.ctx)  # this task's context only: open_cleanup_scope finds it
        start: Any = child.spec.start
        try:
            with run.scope:
                await start(task_status=_ChildStatus(run))
        except Exception as exc:
            run.error = exc
            # Recorded here, not when the supervisor gets round to it, so statistics() is current.
            child.last_failure = repr(exc)
        finally:
            run.exited = True
            run.done.set()
            run.settled.set()
            if run.ready and not run.stopping and self._exits_send is not None:
                self._exits_send.send_nowait((child, run))

    async def _start(self, child: _Child) -> BaseException | None:
        """Spawn one incarnation and wait until it is ready; its exception if it is not."""
        assert self._nursery is not None
        run = _Run()
        child.run = run
        self._nursery.start_soon(self._child_main, child, run, name=f"{self.name}/{child.spec.id}")
        await run.settled.wait()
        if run.ready:
            log.info(
                "supervisor %s: started %s",
                self.name,
                child.spec.id,
                extra=self._extra("start", child),
            )
            return None
        if run.error is not None:
            return run.error
        return RuntimeError(f"child {child.spec.id!r} exited without calling task_status.started()")

    async def _stop_child(self, child: _Child) -> None:
        run = child.run
        if run is None or run.exited:
            return
        run.stopping = True
        log.info("supervisor %s: stopping %s", self.name, child.spec.id, extra=self._extra("stop", child))
        run.scope.cancel()
        with trio.move_on_after(child.spec.shutdown):
            await run.done.wait()
        if not run.exited:
            log.warning(
                "supervisor %s: %s did not stop within %ss; cancelling its cleanup",
                self.name,
                child.spec.id,
                child.spec.shutdown,
                extra=self._extra("stop", child),
            )
            run.ctx.hard_cancel()
            await run.done.wait()

    async def _stop_all(self) -> None:
        try:
            for child in reversed(list(self._children)):
                await self._stop_child(child)
        except trio.Cancelled:
            # Our own grace ran out: no more order, everything goes now.
            for child in self._children:
                run = child.run
                if run is not None and not run.exited:
                    run.stopping = True
                    run.scope.cancel()
                    run.ctx.hard_cancel()
            raise

    async def _supervise(self, exits: trio.MemoryReceiveChannel[tuple[_Child, _Run]]) -> SupervisorEscalation:
        while True:
            child, run = await exits.receive()
            escalation = await self._recover(child, run)
            if escalation is not None:
                return escalation

    def _affected(self, child: _Child) -> list[_Child]:
        if self.strategy is Strategy.ONE_FOR_ONE:
            return [child]
        if self.strategy is Strategy.ONE_FOR_ALL:
            return list(self._children)
        return self._children[self._children.index(child) :]

    async def _recover(self, child: _Child, run: _Run) -> SupervisorEscalation | None:
        failure = run.error
        while True:
            async with self._lock:
                if child.run is not run or child not in self._children:
                    return None  # removed, or already replaced by a group restart
                self._log_exit(child, failure)
                if not _should_restart(child.spec.restart, failure):
                    self._children.remove(child)
                    return None
                now = trio.current_time()
                if self._intensity_exceeded(now):
                    log.error(
                        "supervisor %s: more than %d restarts within %ss; giving up",
                        self.name,
                        self.intensity.max_restarts,
                        self.intensity.within,
                        extra=self._extra("escalate", child, failure),
                    )
                    telemetry.observer.escalated(self.kind)
                    return SupervisorEscalation(self.name, child.spec.id, failure)
                self._restarts_total += 1
                telemetry.observer.restarted(self.kind)
                affected = await self._stop_group(child)
                delay = self._next_delay(child, run, now)
            # Sleep without the lock so add_child/remove_child are not held up by a backoff.
            await trio.sleep(delay)
            async with self._lock:
                failed, failure = await self._restart_group(affected, delay, failure)
            if failed is None or failed.run is None:
                return None
            child, run = failed, failed.run

    def _log_exit(self, child: _Child, failure: BaseException | None) -> None:
        if failure is not None:
            log.warning(
                "supervisor %s: %s crashed: %r",
                self.name,
                child.spec.id,
                failure,
                exc_info=failure,
                extra=self._extra("crash", child, failure),
            )
        else:
            log.info(
                "supervisor %s: %s exited normally",
                self.name,
                child.spec.id,
                extra=self._extra("stop", child),
            )

    def _intensity_exceeded(self, now: float) -> bool:
        """Count a restart at `now`; True when that makes more than the intensity allows."""
        times = self._restart_times
        times.append(now)
        while times[0] <= now - self.intensity.within:
            times.popleft()
        return len(times) > self.intensity.max_restarts

    async def _stop_group(self, child: _Child) -> list[_Child]:
        """Stop the siblings the strategy restarts with `child`; the ones to start again."""
        affected = self._affected(child)
        for sibling in reversed(affected):
            if sibling is not child:
                await self._stop_child(sibling)
        # OTP: a temporary sibling stopped for a group restart is not brought back.
        for sibling in affected:
            if sibling is not child and sibling.spec.restart is Restart.TEMPORARY:
                self._children.remove(sibling)
        return [c for c in affected if c is child or c.spec.restart is not Restart.TEMPORARY]

    def _next_delay(self, child: _Child, run: _Run, now: float) -> float:
        if run.ready and now - run.ready_at >= self.backoff.reset_threshold:
            child.attempt = 0
        delay = self.backoff.delay(child.attempt, self._rng)
        child.attempt += 1
        return delay

    async def _restart_group(
        self, affected: list[_Child], delay: float, failure: BaseException | None
    ) -> tuple[_Child | None, BaseException | None]:
        """Start the stopped children again in order; the first that fails to start, and why."""
        for c in affected:
            if c not in self._children or c.alive:
                continue
            c.restarts += 1
            log.info(
                "supervisor %s: restarting %s after %.3fs",
                self.name,
                c.spec.id,
                delay,
                extra=self._extra("restart", c, failure),
            )
            error = await self._start(c)
            if error is not None:
                return c, error
        return None, failure

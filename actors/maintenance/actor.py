"""The defrag actor: a per-cluster child that decides *when* members are defragmented.

It wakes every few seconds, reads what the cluster actor last observed (never observing on its
own) and starts a round on the cluster's MaintenanceBoard when spec.maintenance.defrag's
schedule fires, or when members are fragmented enough; the cluster actor's planning then
defragments them one at a time (actors/plan/maintenance.py). It also tidies the board: members
that left the cluster, and a NOSPACE recovery whose disarm the members have all seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio
from attrs import frozen

from actors.cluster_context import ChildFactory, ClusterContext, LookAgain, nudge
from actors.maintenance.board import DefragRound, MaintenanceBoard
from actors.maintenance.trigger import fragmentation_story, fragmented_members
from actors.model import DefragSpec
from actors.observed import Observed
from actors.schedule import due, utc
from supervisor.runtime import Actor, ChildSpec, Handle, Mailbox, run_actor

WAKE_EVERY = 2.0
# After a round, fragmentation is not read again for this long: the probes that follow a
# defrag take a tick or two to show the smaller files.
COOLDOWN = 30.0
# A disarmed NOSPACE recovery is over once no member reports the alarm, or after this long
# (a member that keeps reporting it has raised it again: a new recovery starts).
DISARM_GRACE = 10.0


@frozen
class Wake:
    """Look at the schedule and the fragmentation (a timer tick)."""


class DefragActor(Actor[Wake]):
    def __init__(self, context: ClusterContext, clock: Callable[[], float]) -> None:
        self._context = context
        self._clock = clock  # wall time, for the schedule
        self._since: float | None = None  # the schedule's last firing handled (or first sight)
        self._quiet_until = float("-inf")  # trio time: no fragmentation rounds before this
        self._disarmed_at: float | None = None

    @property
    def _board(self) -> MaintenanceBoard:
        return self._context.reports.maintenance

    async def handle(self, msg: Wake) -> None:
        observed = self._context.feed.latest
        if observed is None:
            return  # the cluster actor has not looked yet
        self._tidy(observed)
        resource = self._context.desired().resource
        defrag = resource.spec.maintenance.defrag
        if defrag is None or self._board.round is not None or resource.suspended or resource.spec.hibernate:
            return  # suspended or hibernating: no round begins (one under way is held)
        round_ = self._scheduled(defrag, observed) or self._fragmented(defrag, observed)
        if round_ is not None and self._board.begin(round_):
            self._quiet_until = trio.current_time() + COOLDOWN
            members = ", ".join(sorted(round_.pending))
            why = round_.story or round_.reason
            await self._event("DefragScheduled", f"defragmenting {members} one at a time: {why}")
            nudge(self._context.handle, LookAgain())

    def _scheduled(self, defrag: DefragSpec, observed: Observed) -> DefragRound | None:
        now = self._clock()
        if defrag.schedule is None:
            return None
        if self._since is None:
            self._since = now  # a slot missed before the daemon started is not made up
        if not due(defrag.schedule, utc(self._since), utc(now)):
            return None
        self._since = now
        members = frozenset(observed.name_of(m) for m in observed.voters())
        return DefragRound(f"schedule '{defrag.schedule}'", members)

    def _fragmented(self, defrag: DefragSpec, observed: Observed) -> DefragRound | None:
        if trio.current_time() < self._quiet_until:
            return None
        names = fragmented_members(defrag, observed)
        return (
            DefragRound("fragmentation", names, story=fragmentation_story(observed, names)) if names else None
        )

    def _tidy(self, observed: Observed) -> None:
        board = self._board
        board.prune(frozenset(observed.name_of(m) for m in observed.members))
        current = board.round
        if current is None or not current.disarmed:
            self._disarmed_at = None
            return
        now = trio.current_time()
        self._disarmed_at = self._disarmed_at if self._disarmed_at is not None else now
        if not observed.nospace() or now - self._disarmed_at >= DISARM_GRACE:
            board.finish()
            self._disarmed_at = None
            self._quiet_until = now + COOLDOWN
            nudge(self._context.handle, LookAgain())

    async def _event(self, reason: str, message: str) -> None:
        await self._context.ports.events.record(self._context.ref, reason=reason, message=message)


async def _wake(handle: Handle[Wake], every: float) -> None:
    while True:
        handle.send_nowait(Wake())  # coalesced: one pending wake at most
        await trio.sleep(every)


def defrag_child(*, clock: Callable[[], float] = time.time, wake_every: float = WAKE_EVERY) -> ChildFactory:
    """The per-cluster child for defragmentation: the actor with its wake-up timer."""

    def child(context: ClusterContext) -> ChildSpec:
        async def start(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            handle: Handle[Wake] = Handle(Mailbox(1, coalesce_key=lambda msg: "wake"), id="defrag")
            async with trio.open_nursery() as nursery:
                await nursery.start(run_actor, DefragActor(context, clock), handle)
                nursery.start_soon(_wake, handle, wake_every)
                task_status.started()

        return ChildSpec("defrag", start, shutdown=2.0)

    return child

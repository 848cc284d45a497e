"""The steps of maintenance: compact for space, defragment one member, disarm NOSPACE.

Each records its progress on the cluster's MaintenanceBoard (`ctx.maintenance`), so the next
plan sees it at once, without waiting for fresh probes. What a step found (bytes reclaimed,
seconds taken) is in its Outcome: the text of its Event, and the numbers, for the metrics.
Pure: the ports and the clock of its ActionContext, nothing else.
"""

from __future__ import annotations

from typing import ClassVar

from attrs import frozen

from actors.actions import Action, ActionContext, MoveLeader, Outcome
from actors.errors import EtcdError
from actors.maintenance.board import DefragRound
from actors.measurements import Defragmented


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


@frozen
class CompactForSpace(Action):
    """NOSPACE recovery, first step: compact the history, then defragment every member."""

    keep_revisions: int | None  # autoCompaction's revision retention, kept on a first try
    # A periodic retention kept on a first try: compact up to this revision, the newest seen at
    # least `retention` ago (0: none seen that long ago, so nothing is compacted). None: no limit.
    up_to: int | None = None
    retention: str = ""  # the periodic retention, for the Event
    event_reason: ClassVar[str] = "HistoryCompacted"

    async def execute(self, ctx: ActionContext) -> Outcome:
        current = await ctx.admin.revision(ctx.endpoints)
        target = self._target(current)
        if target > 0:
            await ctx.admin.compact(ctx.endpoints, target)
        members = frozenset(ctx.observed.name_of(m) for m in ctx.observed.voters())
        ctx.maintenance.restart_recovery(
            DefragRound("NOSPACE alarm", members, for_space=True, compacted_fully=target == current)
        )
        if target <= 0:
            return Outcome(
                f"NOSPACE alarm: no revision is known to be {self.retention} old yet, so the whole "
                "history (autoCompaction's retention) is kept on a first try; defragmenting next"
            )
        kept = f", keeping {self._kept()}" if target != current else ""
        return Outcome(f"NOSPACE alarm: compacted the history to revision {target}{kept}; defragmenting next")

    def _target(self, current: int) -> int:
        if self.up_to is not None:
            return min(self.up_to, current)
        keep = self.keep_revisions or 0
        return current - keep if 0 < keep < current else current

    def _kept(self) -> str:
        if self.up_to is not None:
            return f"the last {self.retention} of history"
        return f"the last {self.keep_revisions} revisions"

    def describe(self) -> str:
        return "compacted the history (NOSPACE alarm)"

    def progress(self) -> str:
        how = (
            f"keeping {self._kept()}"
            if self.keep_revisions or self.up_to is not None
            else "to the current revision"
        )
        return f"NOSPACE alarm: compacting the history {how}"


@frozen
class DefragMember(Action):
    """Defragment one member: it serves nothing meanwhile, so never the leader of a cluster
    that has another member to lead."""

    name: str
    reason: str
    event_reason: ClassVar[str] = "MemberDefragmented"
    time_limit: ClassVar[float | None] = 660.0  # etcd's own defrag of a large file, and two Status calls

    async def execute(self, ctx: ActionContext) -> Outcome:
        url = ctx.observed.runtime_by_name()[self.name].urls.client_url
        before = await ctx.admin.member_health(url)
        if before.member_id == before.leader_id and len(ctx.observed.voters()) > 1:
            raise EtcdError(f"{self.name} leads now; leadership moves before it is defragmented")
        started = ctx.clock()
        await ctx.admin.defragment(url)
        seconds = ctx.clock() - started
        after = await ctx.admin.member_health(url)
        ctx.maintenance.defragmented(self.name, after.db_size)
        reclaimed = before.db_size - after.db_size
        return Outcome(
            f"defragmented {self.name} ({self.reason}): {reclaimed} bytes reclaimed "
            f"({mib(before.db_size)} -> {mib(after.db_size)}) in {seconds:.2f}s",
            Defragmented(reclaimed, seconds),
        )

    def describe(self) -> str:
        return f"defragmented {self.name} ({self.reason})"

    def progress(self) -> str:
        return f"defragmenting {self.name} ({self.reason})"


@frozen
class MoveLeaderToDefrag(MoveLeader):
    """Leadership off the last member of a round, remembered on the board: the next plan
    reads probes from before the move for up to a tick."""

    from_id: int = 0

    async def execute(self, ctx: ActionContext) -> Outcome:
        moved = await super().execute(ctx)
        ctx.maintenance.mark(moved_off=self.from_id)
        return moved


@frozen
class DisarmNospace(Action):
    largest: int  # bytes of the largest member database after the recovery
    quota: int
    event_reason: ClassVar[str] = "NospaceAlarmDisarmed"

    async def execute(self, ctx: ActionContext) -> Outcome:
        cleared = await ctx.admin.disarm_nospace(ctx.endpoints)
        ctx.maintenance.mark(disarmed=True)
        return Outcome(f"disarmed {cleared} NOSPACE alarm(s): {self._sizes()}; writes are accepted again")

    def _sizes(self) -> str:
        return f"largest member database {mib(self.largest)} of the {mib(self.quota)} quota"

    def describe(self) -> str:
        return f"disarmed the NOSPACE alarm: {self._sizes()}"

    def progress(self) -> str:
        return f"NOSPACE alarm: disarming, {self._sizes()}"


@frozen
class ReportSpaceExhausted(Action):
    """Compacted and defragmented, and the live data still does not fit: say so, then stop."""

    largest: int
    quota: int
    event_reason: ClassVar[str] = "LiveDataExceedsQuota"

    async def execute(self, ctx: ActionContext) -> Outcome:
        ctx.maintenance.mark(exhausted=True)
        return self.done()

    def describe(self) -> str:
        return exhausted_story(self.largest, self.quota)

    def progress(self) -> str:
        return exhausted_story(self.largest, self.quota)


def exhausted_story(largest: int, quota: int) -> str:
    return (
        f"NOSPACE: the live data ({mib(largest)} after compaction and defragmentation) does not fit "
        f"the quota ({mib(quota)}); writes stay refused until spec.maintenance.quotaBackendBytes is raised "
        "or keys are deleted"
    )

"""The maintenance board: the defrag round in progress, shared by the defrag actor (which
starts rounds) and the steps the cluster actor executes (which record progress).

It lives in the cluster's ServiceReports, so it outlives restarts of both actors; the planner
reads a frozen copy of the round in `Observed`. Pure: no trio, no I/O.
"""

from __future__ import annotations

import attrs
from attrs import frozen


@frozen
class DefragRound:
    """Members to defragment one at a time, and why."""

    reason: str  # for Events and the status: "schedule '0 3 * * *'", "fragmentation", ...
    pending: frozenset[str]  # members not yet defragmented in this round
    # A NOSPACE recovery: the history was compacted first, and the alarm is disarmed after.
    for_space: bool = False
    # The recovery compacted to the current revision (no retention kept): nothing more to free.
    compacted_fully: bool = False
    # Database file size of each member once defragmented in this round.
    sizes_after: tuple[tuple[str, int], ...] = ()
    story: str = ""  # what started it, in detail, for its first Event
    # The leader moved off to defragment it: probes that still show it leading are stale.
    moved_off: int | None = None
    disarmed: bool = False  # the NOSPACE alarm was cleared; waiting for members to show it
    exhausted: bool = False  # compacted and defragmented, and the live data still does not fit

    @property
    def done(self) -> bool:
        return not self.pending

    def largest_after(self) -> int:
        return max((size for _, size in self.sizes_after), default=0)


class MaintenanceBoard:
    def __init__(self) -> None:
        self.round: DefragRound | None = None

    def begin(self, round_: DefragRound) -> bool:
        """Start `round_` unless one is under way (a NOSPACE recovery replaces any other)."""
        if self.round is not None and not (round_.for_space and not self.round.for_space):
            return False
        self.round = round_
        return True

    def restart_recovery(self, round_: DefragRound) -> None:
        """A NOSPACE recovery that must compact further starts over on every member."""
        self.round = round_

    def defragmented(self, name: str, size_after: int) -> None:
        current = self.round
        if current is None:
            return
        after = (*(s for s in current.sizes_after if s[0] != name), (name, size_after))
        current = attrs.evolve(current, pending=current.pending - {name}, sizes_after=after)
        # An ordinary round is over once every member is done; a recovery still has to disarm.
        self.round = None if current.done and not current.for_space else current

    def mark(self, **changes: bool | int) -> None:
        if self.round is not None:
            self.round = attrs.evolve(self.round, **changes)  # type: ignore[arg-type]

    def prune(self, present: frozenset[str]) -> None:
        """Forget members that left the cluster; an ordinary round with none left is over."""
        current = self.round
        if current is None or current.pending <= present:
            return
        current = attrs.evolve(current, pending=current.pending & present)
        self.round = None if current.done and not current.for_space else current

    def finish(self) -> None:
        self.round = None

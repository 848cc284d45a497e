"""What the cluster actor remembers of each member over time: when it last answered, since when
it runs or is stopped, and whether it was already restarted for not answering.

Pure bookkeeping with the clock passed in (no trio), so the rules are testable on their own.
It is memory, not a fact of the world: a restarted cluster actor starts it afresh, which only
means it waits one more `unresponsiveAfter` before judging a member.
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import define, field

from actors.model import ProcessState, RuntimeMember, Vanished

_UP = (ProcessState.STARTING, ProcessState.RUNNING)


@define
class MemberTimes:
    # name -> (state, pid) as last seen, to notice a start, a restart or an exit.
    _seen: dict[str, tuple[ProcessState, int | None]] = field(factory=dict)
    _up_since: dict[str, float] = field(factory=dict)
    _down_since: dict[str, float] = field(factory=dict)
    _answered_at: dict[str, float] = field(factory=dict)
    _first_seen: dict[str, float] = field(factory=dict)
    _restarted_silent: set[str] = field(factory=set)
    # Restarted by us since the last listing: its silence counts afresh from that listing on,
    # even where the runtime shows no new pid (a pod keeps pid None).
    _restarted_unseen: set[str] = field(factory=set)
    # When answers from the member's current process begin to count (answers_from).
    _answers_from: dict[str, float] = field(factory=dict)
    _listed_at: float | None = None  # the previous listing
    # Members whose pod the scheduler could not place, since when (a drained node's volume).
    _unplaced_since: dict[str, float] = field(factory=dict)

    def seen(self, runtime: Iterable[RuntimeMember], now: float) -> None:
        """Fold in the runtime's members as listed at `now`."""
        names = set()
        for r in runtime:
            names.add(r.name)
            self._first_seen.setdefault(r.name, now)
            before = self._seen.get(r.name)
            self._seen[r.name] = (r.state, r.pid)
            if r.unschedulable:
                self._unplaced_since.setdefault(r.name, now)
            else:
                self._unplaced_since.pop(r.name, None)
            if r.state not in _UP:
                self._down_since.setdefault(r.name, now)
                self._up_since.pop(r.name, None)
                continue
            # A start: up after being down (or unknown), a new pid, or a restart of ours. Starting
            # turning into running is the same process: its answers still count.
            started = before is None or before[0] not in _UP or before[1] != r.pid
            if started or r.name in self._restarted_unseen:
                self._up_since[r.name] = now  # silence counts from here
                self._down_since.pop(r.name, None)
                self._answers_from[r.name] = self._first_answer_time(before, r.name, now)
        self._restarted_unseen.clear()
        self._listed_at = now
        for gone in set(self._seen) - names:
            self._forget(gone)

    def started_at(self, name: str) -> float | None:
        """When the member was last seen (re)starting; None while it is stopped or unknown."""
        return self._up_since.get(name)

    def answers_from(self, name: str) -> float | None:
        """From when on a probe's answer comes from the member's current process (asked at or
        after it); None while the member is stopped or unknown."""
        return self._answers_from.get(name) if name in self._up_since else None

    def _first_answer_time(
        self, before: tuple[ProcessState, int | None] | None, name: str, now: float
    ) -> float:
        # A member without a process at the previous listing (no pod, perhaps no volume)
        # started after it, so answers asked since then are its own. Its first answer often
        # comes in while the listing that first shows it is still under way (a learner in a
        # pod made ahead serves within 0.1 s); refusing that answer leaves the next step
        # waiting for the pod's next change, up to a kubelet relist later. After a restart (a
        # new pid, or one of ours) or a stop (a pod being deleted still runs), the old
        # process may have answered until the new one was seen: those count from now.
        absent = before is None or before[0] is ProcessState.ABSENT
        if absent and name not in self._restarted_unseen and self._listed_at is not None:
            return self._listed_at
        return now

    def answered(self, name: str, now: float) -> None:
        self._answered_at[name] = now
        self._restarted_silent.discard(name)

    def restarted_for_silence(self, name: str) -> None:
        self._restarted_silent.add(name)
        self._restarted_unseen.add(name)

    def silent_for(self, now: float) -> dict[str, float]:
        """Running members: seconds since they last answered (or started, if later)."""
        return {
            name: now - max(since, self._answered_at.get(name, since))
            for name, since in self._up_since.items()
        }

    def stopped_for(self, now: float) -> dict[str, float]:
        """Stopped members: seconds since they were first seen stopped."""
        return {name: now - since for name, since in self._down_since.items()}

    def unplaced_for(self, now: float) -> dict[str, float]:
        """Members whose pod cannot be scheduled: seconds since that was first seen."""
        return {name: now - since for name, since in self._unplaced_since.items()}

    def unreachable_for(self, now: float) -> dict[str, float]:
        """Every member: seconds since it last answered a probe, whatever its process did
        meanwhile (restarts do not reset it); never answered: since first seen."""
        return {name: now - self._answered_at.get(name, first) for name, first in self._first_seen.items()}

    def restarted_silent(self) -> frozenset[str]:
        return frozenset(self._restarted_silent)

    def _forget(self, name: str) -> None:
        for table in (
            self._seen,
            self._up_since,
            self._down_since,
            self._answered_at,
            self._first_seen,
            self._answers_from,
            self._unplaced_since,
        ):
            table.pop(name, None)
        self._restarted_silent.discard(name)
        self._restarted_unseen.discard(name)


@define
class Vanishings:
    """Members deleted in a row for vanishing from etcd's membership, until one joins for good
    (a learner promoted). Memory of the cluster actor, as the rest of this module."""

    _times: int = 0
    _last: str = ""
    _at: float = 0.0

    def vanished(self, name: str, now: float) -> None:
        self._times, self._last, self._at = self._times + 1, name, now

    def joined(self) -> None:
        self._times = 0

    def facts(self, now: float) -> Vanished | None:
        return Vanished(self._last, self._times, now - self._at) if self._times else None

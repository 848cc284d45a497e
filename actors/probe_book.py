"""What a cluster actor's probes told it: each member's latest answer and when it was asked.

An answer counts while it is young (`fresh`) and given by the member's current process (asked
at or after `answers_from`, which MemberTimes keeps). Answers asked before the last step ended
describe the cluster before it (the old process of a restarted member, the leader before a
move); the time steps ran does not age the answers asked before them. The book also keeps the
highest store revision any member reported and the revision samples a periodic
autoCompaction's retention needs. Pure: every time is passed in; each change is a new book.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

import attrs
from attrs import field, frozen

from actors.maintenance.revisions import RevisionSamples
from actors.model import MemberHealth

# Steps whose running time is kept: no member is asked again while a step runs, so an answer
# asked before them is aged by the time between them only. More than a TTL's worth of steps.
RECENT_STEPS = 16

# When the member's current process began to count (MemberTimes.answers_from): None, unknown.
AnswersFrom = Callable[[str], float | None]


@frozen
class ProbeBook:
    # name -> (its latest answer, None when it did not answer; when that answer was asked)
    answers: Mapping[str, tuple[MemberHealth | None, float]] = field(factory=dict)
    # When the last step (succeeded or failed) ended.
    step_done_at: float = -math.inf
    # (start, end) of the recent steps, oldest first.
    recent_steps: tuple[tuple[float, float], ...] = ()
    # The highest store revision any member reported (what a quorum loss may cost beyond the
    # survivor's): memory only, a restarted actor learns it again from the members.
    revision_seen: int = 0
    # The revision a periodic autoCompaction's retention ago, for a NOSPACE recovery's first
    # compaction; a restarted actor samples afresh (and keeps all history until it can tell).
    revisions: RevisionSamples = field(factory=RevisionSamples)

    def superseded(self, name: str, asked_at: float) -> bool:
        """An answer asked later than this one is already in (an eager probe's)."""
        kept = self.answers.get(name)
        return kept is not None and kept[1] > asked_at

    def fold(
        self,
        name: str,
        health: MemberHealth | None,
        asked_at: float,
        *,
        now: float,
        answers_from: float | None,
        window: float | None,
    ) -> tuple[ProbeBook, bool]:
        """The book with this answer in, and whether it changes what the plan or the status
        reads. `window`: the periodic autoCompaction's retention in seconds (None: none)."""
        before = self.answers.get(name)
        book = attrs.evolve(self, answers={**self.answers, name: (health, asked_at)})
        if health is not None:
            book = attrs.evolve(
                book,
                revision_seen=max(self.revision_seen, health.revision),
                revisions=self.revisions.record(now, health.revision, window),
            )
        if before is None or before[1] < self.step_done_at <= asked_at:
            return book, True  # the first answer since the last step: the rollout waits on it
        if not counts(before[1], answers_from):
            return book, True  # the answer before was refused (older than the process): this one counts
        return book, picture(before[0]) != picture(health)

    def only(self, names: Iterable[str]) -> ProbeBook:
        """The book of these members only (the others left the runtime)."""
        kept = set(names)
        if kept >= set(self.answers):
            return self
        return attrs.evolve(self, answers={n: v for n, v in self.answers.items() if n in kept})

    def fresh(self, now: float, ttl: float, answers_from: AnswersFrom) -> dict[str, MemberHealth | None]:
        """Answers young enough to count, and given by the member's current process."""
        return {
            n: h
            for n, (h, at) in self.answers.items()
            if self.answer_age(at, now) <= ttl and counts(at, answers_from(n))
        }

    def answer_age(self, asked_at: float, now: float) -> float:
        """How long the members have been asked about since this answer's question: the time
        steps ran does not count for an answer asked before they started (its answer may have
        come in during one; steps longer than the TTL would otherwise make every member look
        silent, and the quorum lost, right after them: PhaseFailed after each defrag of a large
        database). A member a step restarted is excluded by its start time, not by age."""
        busy = sum(end - start for start, end in self.recent_steps if start >= asked_at)
        return now - asked_at - busy

    def unprobed(self, names: Iterable[str]) -> frozenset[str]:
        """Of these members, those no probe answered (nor failed to) since the book began."""
        return frozenset(n for n in names if n not in self.answers)

    def answered_before_step(self, names: Iterable[str]) -> frozenset[str]:
        """Of these members, those whose answer was asked before the last step ended."""
        return frozenset(n for n in names if self.answers[n][1] < self.step_done_at)

    def step_ran(self, started: float, done: float) -> ProbeBook:
        """A step ran from `started` to `done`: what the next one reads must postdate it."""
        steps = (*self.recent_steps, (started, done))[-RECENT_STEPS:]
        return attrs.evolve(self, step_done_at=done, recent_steps=steps)

    def recovered(self, revision: int) -> ProbeBook:
        """The cluster was rebuilt at `revision`: that history is the one to follow now."""
        return attrs.evolve(self, revision_seen=revision, revisions=RevisionSamples())


def counts(asked_at: float, answers_from: float | None) -> bool:
    """Whether an answer asked at `asked_at` is the member's current process speaking."""
    return asked_at >= (answers_from if answers_from is not None else asked_at)


def picture(health: MemberHealth | None) -> tuple[object, ...] | None:
    """What of a probe's answer the plan and the status read: a steady member's answers, tick
    after tick, have the same picture (its raft index moves with every write; that does not
    matter, except for a learner catching up)."""
    if health is None:
        return None
    progress = health.raft_applied_index if health.is_learner else None
    return (
        health.member_id,
        health.leader_id,
        health.is_learner,
        bool(health.errors),
        health.alarms,
        progress,
        health.downgrade_target,  # a downgrade enabled, and the data kept in the older
        health.storage_version,  # version: the rollback may go on
        health.cluster_version,
    )

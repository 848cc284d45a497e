"""Defragmentation rounds and NOSPACE recovery, one member at a time.

The defrag actor starts ordinary rounds; a NOSPACE alarm starts a recovery here: compact the
history (keeping autoCompaction's retention on a first try), defragment every member,
and disarm once the largest database leaves room under the quota. If it does not even after
compacting everything, say so once and stop: raising the quota is the user's fix (the members
are restarted with it one at a time, then the alarm is disarmed).

The order within a round: followers first, then leadership moves and the old leader goes last,
so the cluster always has a leader that is not blocked. Nothing while a member is unhealthy or
membership is changing. Pure.
"""

from __future__ import annotations

from actors.actions import Step, Wait
from actors.maintenance.board import DefragRound
from actors.maintenance.revisions import periodic_retention_seconds, revision_at_least
from actors.maintenance.steps import (
    CompactForSpace,
    DefragMember,
    DisarmNospace,
    MoveLeaderToDefrag,
    ReportSpaceExhausted,
    exhausted_story,
)
from actors.model import ClusterSpec, CompactionMode
from actors.observed import Observed

# The alarm is disarmed only when the largest database leaves a tenth of the quota free:
# disarming with less would have the next few writes raise it again.
SPACE_HEADROOM = 0.9


def maintain(spec: ClusterSpec, observed: Observed) -> Step | None:
    round_ = observed.maintenance
    if round_ is not None and round_.for_space:
        return _recover(spec, observed, round_)
    if observed.nospace():
        return _first_compaction(spec, observed)
    if round_ is not None:
        return _defrag_next(spec, observed, round_)
    return None


def _recover(spec: ClusterSpec, observed: Observed, round_: DefragRound) -> Step | None:
    quota = spec.maintenance.quota_bytes
    fits = round_.largest_after() < SPACE_HEADROOM * quota
    if round_.disarmed:
        # Probes from before the disarm still show the alarm for a moment.
        return (
            Wait("NOSPACE alarm disarmed; waiting for the members to report it")
            if observed.nospace()
            else None
        )
    if not round_.done:
        return _defrag_next(spec, observed, round_)
    if observed.to_roll():
        # A new configuration (a raised quota) rolls out first, by the planner after this one:
        # disarming before the members run with it would only have the next write raise it again.
        return None
    if fits:
        return DisarmNospace(round_.largest_after(), quota)
    if not round_.compacted_fully:
        return CompactForSpace(None)
    if not round_.exhausted:
        return ReportSpaceExhausted(round_.largest_after(), quota)
    return Wait(exhausted_story(round_.largest_after(), quota))


def _defrag_next(spec: ClusterSpec, observed: Observed, round_: DefragRound) -> Step | None:
    blocked = _blocked(spec, observed)
    if blocked:
        return Wait(f"defragmentation ({round_.reason}) waits: {blocked}")
    leader = observed.leader_id()
    pending = sorted(
        (m for m in observed.voters() if observed.name_of(m) in round_.pending), key=observed.name_of
    )
    if not pending:
        return None
    followers = [m for m in pending if m.id != leader or m.id == round_.moved_off]
    if followers:
        return DefragMember(observed.name_of(followers[0]), round_.reason)
    old = pending[0]
    others = sorted((m for m in observed.healthy_voters() if m.id != old.id), key=observed.name_of)
    if not others:
        return DefragMember(
            observed.name_of(old), round_.reason
        )  # a one-member cluster: nobody to hand over to
    target = others[0]
    name = observed.name_of(old)
    reason = f"moving leadership off {name} to defragment it"
    return MoveLeaderToDefrag(observed.name_of(target), target.id, reason=reason, from_id=old.id)


def _blocked(spec: ClusterSpec, observed: Observed) -> str | None:
    if observed.learners() or len(observed.own_voters()) != spec.size:
        return "a membership change is in progress"
    unhealthy = sorted(r.name for r in observed.runtime if not observed.is_healthy(r.name))
    if unhealthy:
        return "unhealthy: " + ", ".join(unhealthy)
    if observed.leader_id() is None:
        return "no leader"
    return None


def _first_compaction(spec: ClusterSpec, observed: Observed) -> CompactForSpace:
    """Compact keeping autoCompaction's retention; without one, everything."""
    compaction = spec.maintenance.auto_compaction
    if compaction is None:
        return CompactForSpace(None)
    if compaction.mode is CompactionMode.REVISION:
        return CompactForSpace(int(compaction.retention))
    window = periodic_retention_seconds(spec.maintenance)
    assert window is not None
    # Up to the newest revision seen at least the retention ago; none seen that long ago (the
    # supervisor started since) keeps the whole history: etcd's own periodic compactor may have
    # freed space that defragmenting alone gives back.
    up_to = revision_at_least(observed.revision_ages, window)
    return CompactForSpace(None, up_to=up_to or 0, retention=compaction.retention)

"""Quorum lost for good: rebuild the cluster from what survives (spec.disasterRecovery).

A voter is gone for good when its data is gone (a deleted directory or volume: it can never
rejoin), or when it has answered no probe for longer than `recovery_bound`. While the voters
that may still come back could form a quorum, nothing is recovered: a frozen or partitioned
majority returns by itself, and rebuilding meanwhile would make two clusters of one.

Once quorum cannot return, Automatic mode rebuilds:
- from the surviving member whose data is most advanced (highest applied raft index, then
  store revision), started alone with etcd's --force-new-cluster on its own data; the others
  are then deleted as leftovers and the size planner grows the cluster back by learners;
- or, when no member has data left, from the newest verified backup the backup actor reported,
  plus the delta backups after it as far as they reach (spec.backup.deltaPeriod).
Manual mode changes nothing; the quorum guard says what was lost and that a person must act.

Pure: no trio, no asyncio, no I/O.
"""

from __future__ import annotations

from attrs import frozen

from actors.actions import Wait
from actors.model import ClusterSpec, EtcdMember, RecoveryMode, RestoreSpec
from actors.observed import Observed, quorum
from actors.plan.bootstrap import ALL_DATA_LOST, all_data_lost
from actors.plan.common import next_member_name
from actors.recovery import RecoverFromBackup, RecoverFromSurvivor

# How long a voter may stay unreachable before it counts as gone for good. A recovery from a
# survivor can lose writes the lost majority had acknowledged and the survivor had not yet
# applied, while waiting costs only availability, so the bound is generous: longer than the
# supervisor's own repairs of a member (a restart after unresponsiveAfter, crash-loop backoff up
# to a minute), than a node reboot or a pod rescheduled with its volume reattached (typically
# one to three minutes), and three times unresponsiveAfter for clusters that set it high.
RECOVERY_BOUND_MINIMUM = 300.0


def recovery_bound(spec: ClusterSpec) -> float:
    return max(RECOVERY_BOUND_MINIMUM, 3 * spec.health.unresponsive_after_seconds)


@frozen
class QuorumLoss:
    """The voters of a cluster without quorum: which are gone for good, and why."""

    gone: tuple[tuple[str, str], ...]  # (name, why)
    may_return: int  # voters that are up or may still come back
    needed: int  # the quorum of the voters etcd lists

    @property
    def permanent(self) -> bool:
        return self.may_return < self.needed

    def describe(self) -> str:
        gone = "; ".join(f"{name}: {why}" for name, why in self.gone)
        return f"{len(self.gone)} of {len(self.gone) + self.may_return} voting members gone for good ({gone})"


def quorum_loss(spec: ClusterSpec, observed: Observed) -> QuorumLoss | None:
    """None while the cluster has quorum (or etcd's membership is unknown)."""
    voters = observed.voters()
    if not voters or observed.has_quorum():
        return None
    bound = recovery_bound(spec)
    gone: list[tuple[str, str]] = []
    for m in voters:
        why = _gone_for_good(observed, m, bound)
        if why:
            gone.append((observed.display_name(m), why))
    return QuorumLoss(tuple(sorted(gone)), len(voters) - len(gone), quorum(len(voters)))


def _gone_for_good(observed: Observed, member: EtcdMember, bound: float) -> str:
    r = observed.runtime_for(member)
    if observed.is_foreign(member):
        return ""  # an adopted cluster's old member: not ours to restart, nor to give up on
    if r is None or not r.has_data:
        return "its data is gone"
    silent = observed.unreachable_for.get(r.name, 0.0)
    if observed.health.get(r.name) is None and silent >= bound:
        return f"unreachable for {silent:.0f}s (bound {bound:.0f}s)"
    return ""


def recover_quorum(
    spec: ClusterSpec, observed: Observed
) -> RecoverFromSurvivor | RecoverFromBackup | Wait | None:
    if spec.disaster_recovery.mode is not RecoveryMode.AUTOMATIC:
        return None
    if observed.etcd_members is None:
        return from_backup(spec, observed)
    loss = quorum_loss(spec, observed)
    if loss is None or not loss.permanent:
        return None
    gone = {name for name, _ in loss.gone}
    survivors = []
    for m in observed.voters():
        name = observed.name_of(m)
        if observed.display_name(m) in gone:
            continue
        health = observed.health.get(name)
        if health is None:
            # Every survivor must answer first, so that the most advanced one is chosen: one that
            # is down is restarted by the restart planners meanwhile (or is gone after the bound).
            return None
        survivors.append(((health.raft_applied_index, health.revision, name), health.revision))
    if not survivors:
        return None
    (_, _, name), revision = max(survivors)
    return RecoverFromSurvivor(
        name=name,
        revision=revision,
        revision_seen=max(observed.revision_seen, revision),
        lost=loss.describe(),
    )


def from_backup(spec: ClusterSpec, observed: Observed) -> RecoverFromBackup | Wait | None:
    if not all_data_lost(observed):
        return None
    backup = observed.newest_verified_backup
    if backup is None or spec.backup is None or spec.backup.store is None:
        return None
    if spec.backup.delta_period is not None and observed.deltas_reach < backup.revision:
        # The delta actor has not yet listed the chunks after this backup (a daemon just
        # restarted): restoring now would give up every change they hold.
        return Wait(f"{ALL_DATA_LOST}; looking up the delta backups after {backup.key}")
    # With delta backups, as far as they reach: the newest snapshot plus the changes after it.
    revision = observed.deltas_reach if observed.deltas_reach > backup.revision else None
    return RecoverFromBackup(
        name=next_member_name(observed),
        source=RestoreSpec(store=spec.backup.store, key=backup.key, revision=revision),
        stale=tuple(sorted(r.name for r in observed.runtime)),
        revision=revision or backup.revision,
        # The deltas the supervisor stored were observed too (its probes may have lagged them).
        revision_seen=max(observed.revision_seen, revision or backup.revision),
    )

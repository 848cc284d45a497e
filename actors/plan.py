"""Pure decisions: what to do next for one cluster, and what its status is.

`plan(spec, observed)` returns at most one action: membership changes happen one at a time,
and the caller re-observes after each before asking again. No action may cost quorum:
members join as learners and are promoted once caught up, unhealthy members go before
healthy ones, and leadership moves away from a member before it is removed.

No trio, no asyncio, no I/O: everything here is a function of its arguments.
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import frozen

from actors.model import (
    ClusterRef,
    ClusterSpec,
    ClusterStatus,
    Condition,
    EtcdMember,
    MemberHealth,
    MemberStatus,
    Phase,
    ProcessState,
    Role,
    RuntimeMember,
    member_name,
    member_ordinal,
)

# A member that crashed this many times in a row without running healthily in between is
# taken to have corrupt data: it is replaced rather than restarted again. Runtimes count only
# exits of the member's own making; a kill by a signal (OOM killer, a person) is not one.
CRASH_LOOP_LIMIT = 3
# etcd refuses to promote a learner whose log lags too far; promote only once it has applied
# this share of the leader's log, so promotion does not bounce off that check.
LEARNER_CAUGHT_UP_RATIO = 0.9


def quorum(voters: int) -> int:
    return voters // 2 + 1


# --- what was observed ----------------------------------------------------------------------


@frozen
class Observed:
    """One cluster's facts at one moment, as the cluster actor gathered them."""

    runtime: tuple[RuntimeMember, ...]
    # etcd's membership list, or None when no member answered (membership unknown).
    etcd_members: tuple[EtcdMember, ...] | None
    # Latest Status answer per runtime member name; absent or None means unreachable.
    health: Mapping[str, MemberHealth | None]

    def runtime_by_name(self) -> dict[str, RuntimeMember]:
        return {m.name: m for m in self.runtime}

    def runtime_for(self, member: EtcdMember) -> RuntimeMember | None:
        for r in self.runtime:
            if r.urls.peer_url in member.peer_urls:
                return r
        return None

    def is_healthy(self, name: str) -> bool:
        r = self.runtime_by_name().get(name)
        if r is None or r.state is not ProcessState.RUNNING:
            return False
        h = self.health.get(name)
        return h is not None and not h.errors

    def leader_id(self) -> int | None:
        # The leader as most healthy members see it; a lone dissenter is mid-election.
        votes: dict[int, int] = {}
        for name, h in self.health.items():
            if h is not None and h.leader_id and self.is_healthy(name):
                votes[h.leader_id] = votes.get(h.leader_id, 0) + 1
        return max(votes, key=lambda k: votes[k]) if votes else None


# --- actions --------------------------------------------------------------------------------


@frozen
class StartSeed:
    """Bootstrap: start the first member alone, as a new one-member cluster."""

    name: str


@frozen
class StartMember:
    """Start a member's process: a learner just added, or a member restarting from its data."""

    name: str
    initial_cluster: tuple[tuple[str, str], ...]
    reason: str


@frozen
class AddLearner:
    """Reserve addresses for a new member, add it to etcd as a learner, then start it."""

    name: str


@frozen
class PromoteLearner:
    name: str
    member_id: int


@frozen
class MoveLeader:
    to_name: str
    to_id: int
    reason: str


@frozen
class RemoveMember:
    """Remove a member from etcd's membership, then delete it from the runtime."""

    member_id: int
    name: str
    reason: str


@frozen
class DeleteRuntimeMember:
    """Delete a runtime member etcd does not know (a leftover of an interrupted change)."""

    name: str
    reason: str


@frozen
class Wait:
    """Nothing safe to do now; why, for the status message."""

    reason: str


Action = (
    StartSeed | StartMember | AddLearner | PromoteLearner | MoveLeader | RemoveMember | DeleteRuntimeMember
)


def next_member_name(cluster: ClusterRef, observed: Observed) -> str:
    """A fresh name: one past the highest ordinal ever seen, so replacements are new members."""
    ordinals = [member_ordinal(cluster, m.name) for m in observed.runtime]
    if observed.etcd_members:
        ordinals += [member_ordinal(cluster, m.name) for m in observed.etcd_members]
    known = [o for o in ordinals if o is not None]
    return member_name(cluster, max(known) + 1 if known else 0)


def _initial_cluster(
    observed: Observed, members: tuple[EtcdMember, ...], joining: str
) -> tuple[tuple[str, str], ...]:
    # etcd wants name=peerURL for every member, the joining one included; a learner added but
    # not yet started has no name in etcd's list, so names come from the runtime records.
    pairs = []
    for m in members:
        r = observed.runtime_for(m)
        name = m.name or (r.name if r else "")
        if name and m.peer_urls:
            pairs.append((name, m.peer_urls[0]))
    if joining not in {n for n, _ in pairs}:
        r = observed.runtime_by_name().get(joining)
        if r is not None:
            pairs.append((joining, r.urls.peer_url))
    return tuple(sorted(pairs))


def plan(cluster: ClusterRef, spec: ClusterSpec, observed: Observed) -> Action | Wait | None:
    """The single next step towards `spec`, a Wait with its reason, or None when converged."""
    if observed.etcd_members is None:
        return _plan_without_membership(cluster, observed)
    return _plan_with_membership(cluster, spec, observed, observed.etcd_members)


def _plan_without_membership(cluster: ClusterRef, observed: Observed) -> Action | Wait | None:
    runtime = observed.runtime
    if not runtime:
        return StartSeed(member_name(cluster, 0))
    # No member answers: bring back every member that still has data; quorum returns once a
    # majority runs again. Their own data tells etcd the membership, so no flags are needed.
    for r in sorted(runtime, key=lambda m: m.name):
        if r.has_data and r.state in (ProcessState.EXITED, ProcessState.ABSENT):
            return StartMember(r.name, (), reason="restart from its data while membership is unknown")
    if any(r.state in (ProcessState.STARTING, ProcessState.RUNNING) for r in runtime):
        return Wait("waiting for members to answer")
    # Nothing runs and nothing has data. A lone member that never ran is an interrupted
    # bootstrap; several are a cluster whose data is gone.
    if len(runtime) == 1:
        return StartSeed(runtime[0].name)
    return Wait("every member lost its data: only a restore from backup can bring the data back")


def _plan_with_membership(
    cluster: ClusterRef, spec: ClusterSpec, observed: Observed, members: tuple[EtcdMember, ...]
) -> Action | Wait | None:
    voters = [m for m in members if not m.is_learner]
    learners = [m for m in members if m.is_learner]
    healthy_voters = [m for m in voters if _healthy(observed, m)]
    has_quorum = len(healthy_voters) >= quorum(len(voters))

    # 1. Bring back members whose process stopped, from their own data. This never changes
    #    membership, so it is always safe, and it is how a cluster that lost quorum returns.
    for m in sorted(members, key=lambda m: m.name):
        r = observed.runtime_for(m)
        if (
            r is None
            or not m.name
            or not r.has_data
            or r.state not in (ProcessState.EXITED, ProcessState.ABSENT)
        ):
            continue
        if (
            r.consecutive_failures >= CRASH_LOOP_LIMIT
            and has_quorum
            and _can_remove(voters, healthy_voters, m)
        ):
            return RemoveMember(
                m.id, r.name, reason=f"crashed {r.consecutive_failures} times in a row: data presumed corrupt"
            )
        return StartMember(
            r.name,
            _initial_cluster(observed, members, r.name),
            reason="process exited; restart with its data",
        )

    if not has_quorum:
        return Wait(f"quorum lost: {len(healthy_voters)} of {len(voters)} voting members healthy")

    # 2. Members etcd knows whose data is gone (volume or directory deleted): remove them; the
    #    size rule below then adds a new member in their place.
    for m in members:
        r = observed.runtime_for(m)
        started_before = bool(m.name)
        # A process may outlive its deleted data for a while, serving from open files; it can
        # never restart, so it counts as gone already.
        data_gone = r is None or not r.has_data
        if (started_before or r is None) and data_gone and _can_remove(voters, healthy_voters, m):
            return RemoveMember(m.id, m.name or (r.name if r else ""), reason="its data is gone")

    # 3. Runtime leftovers etcd does not know (an interrupted add or remove).
    known = {r.name for m in members if (r := observed.runtime_for(m)) is not None}
    for r in observed.runtime:
        if r.name not in known:
            return DeleteRuntimeMember(r.name, reason="not a member of etcd")

    # 4. The learner in flight: start it, promote it once caught up, or drop it when the size
    #    went down meanwhile. Only one change at a time, so nothing else happens until it is done.
    for m in learners:
        r = observed.runtime_for(m)
        assert r is not None  # step 2 removed learners without a runtime member
        if len(voters) >= spec.size:
            return RemoveMember(m.id, r.name, reason=f"size is {spec.size}: learner no longer needed")
        if r.state in (ProcessState.ABSENT, ProcessState.EXITED):
            return StartMember(
                r.name, _initial_cluster(observed, members, r.name), reason="learner added; start it"
            )
        if _caught_up(observed, r.name):
            return PromoteLearner(r.name, m.id)
        return Wait(f"learner {r.name} catching up")

    # 5. Size. A learner does not vote, but adding one is still a membership change: make it
    #    only while every voter answers (what etcd's strict reconfiguration check would demand;
    #    supervised members run without it, see supervisor/etcd/member_settings.py).
    if len(voters) < spec.size:
        lagging = sorted(_display_name(observed, m) for m in voters if not _healthy(observed, m))
        if lagging:
            return Wait(
                f"adding a member waits for every voting member to be healthy: {', '.join(lagging)} not yet"
            )
        return AddLearner(next_member_name(cluster, observed))
    if len(voters) > spec.size:
        victim = _scale_down_victim(cluster, observed, voters)
        leader = observed.leader_id()
        if victim.id == leader:
            target = next((m for m in healthy_voters if m.id != victim.id), None)
            if target is None:
                return Wait("no healthy member to move leadership to")
            return MoveLeader(target.name, target.id, reason=f"{victim.name} is leaving")
        if not _can_remove(voters, healthy_voters, victim):
            return Wait(f"removing {victim.name} now would cost quorum")
        return RemoveMember(victim.id, victim.name, reason=f"size is {spec.size}")
    return None


def _display_name(observed: Observed, m: EtcdMember) -> str:
    r = observed.runtime_for(m)
    return m.name or (r.name if r else f"{m.id:x}")


def _healthy(observed: Observed, m: EtcdMember) -> bool:
    r = observed.runtime_for(m)
    return r is not None and observed.is_healthy(r.name)


def _can_remove(voters: list[EtcdMember], healthy_voters: list[EtcdMember], m: EtcdMember) -> bool:
    if m.is_learner:
        return True  # learners do not vote
    remaining_healthy = len([v for v in healthy_voters if v.id != m.id])
    return remaining_healthy >= quorum(len(voters) - 1)


def _caught_up(observed: Observed, learner_name: str) -> bool:
    own = observed.health.get(learner_name)
    if own is None or not observed.is_healthy(learner_name):
        return False
    leader_index = max((h.raft_index for h in observed.health.values() if h is not None), default=0)
    return own.raft_applied_index >= leader_index * LEARNER_CAUGHT_UP_RATIO


def _scale_down_victim(cluster: ClusterRef, observed: Observed, voters: list[EtcdMember]) -> EtcdMember:
    # Unhealthy members go first (removing them costs nothing), then followers, newest first;
    # the leader only when nothing else is left.
    leader = observed.leader_id()

    def keep_score(m: EtcdMember) -> tuple[bool, bool, int]:
        r = observed.runtime_for(m)
        ordinal = member_ordinal(cluster, m.name or (r.name if r else ""))
        return (_healthy(observed, m), m.id == leader, -(ordinal if ordinal is not None else -1))

    return min(voters, key=keep_score)


# --- status ---------------------------------------------------------------------------------


def assess(
    spec: ClusterSpec,
    observed: Observed,
    *,
    previous: Phase | None,
    generation: int,
    step: Action | Wait | None,
    now: float,
    previous_conditions: tuple[Condition, ...] = (),
) -> ClusterStatus:
    """The status a cluster shows for what was observed and what comes next."""
    members = observed.etcd_members or ()
    voters = [m for m in members if not m.is_learner]
    healthy_voters = [m for m in voters if _healthy(observed, m)]
    leader = observed.leader_id()
    quorum_ok = bool(voters) and len(healthy_voters) >= quorum(len(voters))
    converged = step is None
    phase = _next_phase(previous, observed, quorum_ok, converged, spec, healthy_voters)

    message = step.reason if isinstance(step, Wait | StartMember | RemoveMember | MoveLeader) else ""
    if isinstance(step, AddLearner):
        message = f"adding member {step.name}"
    elif isinstance(step, PromoteLearner):
        message = f"promoting learner {step.name}"
    elif isinstance(step, StartSeed):
        message = f"starting seed member {step.name}"
    elif converged:
        message = f"{len(healthy_voters)} of {spec.size} members healthy"

    statuses = []
    for m in members:
        r = observed.runtime_for(m)
        name = m.name or (r.name if r else "")
        role = Role.LEARNER if m.is_learner else Role.LEADER if m.id == leader else Role.FOLLOWER
        healthy = _healthy(observed, m)
        statuses.append(
            MemberStatus(
                name=name,
                id=f"{m.id:x}",
                peer_url=m.peer_urls[0] if m.peer_urls else (r.urls.peer_url if r else ""),
                client_url=m.client_urls[0] if m.client_urls else (r.urls.client_url if r else ""),
                role=role if healthy or role is not Role.FOLLOWER else Role.UNKNOWN,
                healthy=healthy,
                pid=r.pid if r else None,
            )
        )
    if observed.etcd_members is None:  # nothing answered: show what the runtime has
        for r in observed.runtime:
            statuses.append(
                MemberStatus(r.name, "", r.urls.peer_url, r.urls.client_url, Role.UNKNOWN, False, r.pid)
            )

    unhealthy = [s.name for s in statuses if not s.healthy]
    conditions = (
        Condition(
            "Available",
            "True" if quorum_ok else "False",
            "QuorumHealthy" if quorum_ok else "QuorumLost",
            f"{len(healthy_voters)} of {len(voters)} voting members healthy",
        ),
        Condition(
            "Progressing",
            "False" if converged else "True",
            "Stable" if converged else type(step).__name__,
            message if not converged else "",
        ),
        Condition(
            "Degraded",
            "True" if unhealthy else "False",
            "MembersUnhealthy" if unhealthy else "AllMembersHealthy",
            ("unhealthy: " + ", ".join(sorted(unhealthy))) if unhealthy else "",
        ),
    )
    return ClusterStatus(
        phase=phase,
        ready_replicas=len([s for s in statuses if s.healthy and s.role is not Role.LEARNER]),
        observed_generation=generation,
        members=tuple(sorted(statuses, key=lambda s: s.name)),
        conditions=carry_transition_times(conditions, previous_conditions, now),
        message=message,
    )


def _next_phase(
    previous: Phase | None,
    observed: Observed,
    quorum_ok: bool,
    converged: bool,
    spec: ClusterSpec,
    healthy_voters: list[EtcdMember],
) -> Phase:
    members = observed.etcd_members or ()
    voters = len([m for m in members if not m.is_learner])
    membership_changing = voters != spec.size or any(m.is_learner for m in members)
    if previous is None:  # a fresh actor: judge from what exists
        bootstrapped = observed.etcd_members is not None or any(r.has_data for r in observed.runtime)
        previous = Phase.RUNNING if bootstrapped else Phase.CREATING
    if previous is Phase.CREATING:
        # Young, not failed: a cluster that never formed has no quorum to lose.
        return Phase.RUNNING if converged and quorum_ok else Phase.CREATING
    if not quorum_ok:
        return Phase.FAILED
    if previous in (Phase.FAILED, Phase.RECOVERING):
        whole = converged and len(healthy_voters) == spec.size
        return Phase.RUNNING if whole else Phase.RECOVERING
    if converged:
        return Phase.RUNNING
    # Restarting a member is healing, not scaling: Degraded says so.
    return Phase.SCALING if membership_changing else Phase.RUNNING


def carry_transition_times(
    conditions: tuple[Condition, ...], previous: tuple[Condition, ...], now: float
) -> tuple[Condition, ...]:
    """Keep a condition's lastTransitionTime unless its status flipped (Kubernetes convention)."""
    before = {c.type: c for c in previous}
    out = []
    for c in conditions:
        old = before.get(c.type)
        stamp = old.last_transition_time if old is not None and old.status == c.status else now
        out.append(Condition(c.type, c.status, c.reason, c.message, stamp))
    return tuple(out)

"""Pure status: what a cluster shows for what was observed and the step that comes next.

Also the status rules that are not decisions: an invalid edit reported over the status, and
the Kubernetes convention for a condition's lastTransitionTime.
"""

from __future__ import annotations

from actors.actions import Action, Step, Wait
from actors.backup.health import BackupReport, backup_condition
from actors.certificates import TlsReport, certificates_condition, tls_status
from actors.maintenance.condition import space_condition
from actors.model import (
    BackupStatus,
    ClusterSpec,
    ClusterStatus,
    Condition,
    LastRecovery,
    MemberStatus,
    Phase,
    Role,
    exit_story,
)
from actors.observed import Observed


def assess(
    spec: ClusterSpec,
    observed: Observed,
    *,
    previous: Phase | None,
    generation: int,
    step: Step | None,
    now: float,
    previous_conditions: tuple[Condition, ...] = (),
    previous_version: str = "",
    problem: str | None = None,
    backup: BackupReport | None = None,
    wall_clock: float | None = None,
    failure: str | None = None,
    last_recovery: LastRecovery | None = None,
    tls: TlsReport | None = None,
    suspended: bool = False,
) -> ClusterStatus:
    """The status for `observed`, given the phase shown before and the next step.

    `problem`: what was wrong with the user's latest edit (the cluster keeps its last good spec and
    says so). `backup`: the backup actor's report, for clusters with spec.backup (judged at `wall_clock`,
    default `now`). `tls`: the renewal child's report, for TLS clusters (status.tls and
    CertificatesValid, judged at `wall_clock` too). `failure`: why a step that fails the cluster (a
    restore) failed; Failed until it works. `suspended`: etcd.io/suspend is "true": phase
    Suspended, and the step the plan would take is named as held, not shown as under way.
    """
    healthy_voters = observed.healthy_voters()
    phase = Phase.FAILED if failure else next_phase(previous, spec, observed, converged=step is None)
    message = failure or step_message(step, healthy=len(healthy_voters), size=spec.size)
    statuses = member_statuses(observed)
    conditions: tuple[Condition, ...] = (
        available_condition(observed),
        _progressing(None if suspended or hibernated(spec, observed) else step, message),
        _degraded(statuses, problem, observed),
        space_condition(spec, observed, step),
        *filter(None, [upgrading_condition(spec, observed), ignored_condition(observed)]),
    )
    tls_report = tls if spec.tls_enabled else None
    conditions += _service_conditions(spec, backup, tls_report, now if wall_clock is None else wall_clock)
    if suspended:
        phase, message = Phase.SUSPENDED, suspended_message(step)
        conditions += (Condition("Suspended", "True", "Annotated", message),)
    if problem:
        message = f"latest spec rejected, still serving the previous one: {problem}"
    return ClusterStatus(
        phase=phase,
        ready_replicas=len(observed.healthy_own_voters()),
        observed_generation=generation,
        members=statuses,
        conditions=carry_transition_times(conditions, previous_conditions, now),
        message=message,
        backup=(backup.status if backup else BackupStatus()) if spec.backup is not None else None,
        last_recovery=last_recovery,
        # Unknown for a moment (no answer yet from the leader, a member restarting) is not a
        # change: the version shown stays until one is known, rather than flickering to "".
        version=cluster_version(statuses, observed) or previous_version,
        db_size=largest_db_size(statuses),
        tls=tls_status(tls_report) if tls_report and tls_report.state else None,
    )


def _service_conditions(
    spec: ClusterSpec, backup: BackupReport | None, tls: TlsReport | None, at: float
) -> tuple[Condition, ...]:
    """The conditions of what the per-cluster children report: backups, certificates."""
    out: tuple[Condition, ...] = ()
    if spec.backup is not None:
        out += (backup_condition(spec.backup, backup, at),)
    if tls is not None:
        out += (certificates_condition(tls, spec.certificates, at),)
    return out


def ignored_condition(observed: Observed) -> Condition | None:
    """SpecIgnored: fields this runtime accepts but does not apply (locally, spec.podTemplate), so
    one manifest serves both modes and the status says what did not take effect."""
    ignored = observed.desired.ignored if observed.desired is not None else ()
    if not ignored:
        return None
    fields = ", ".join(ignored)
    return Condition(
        "SpecIgnored", "True", "KubernetesOnly", f"{fields} applies on Kubernetes only: ignored here"
    )


def too_soon_to_tell(previous: Phase | None, observed: Observed) -> bool:
    """A cluster actor just started (no status of its own yet) has not heard from every running
    member: it publishes nothing yet, so the status on record stands (a restarted daemon shows
    no Failed, no unhealthy member, no Running it does not know). Bounded: every member is
    probed at once, and one that does not answer is given up on after Timing.eager_window."""
    return previous is None and bool(observed.not_heard_from())


def available_condition(observed: Observed) -> Condition:
    """Available: a healthy quorum; Unknown while members not asked yet could make one."""
    healthy = f"{len(observed.healthy_voters())} of {len(observed.voters())} voting members healthy"
    if observed.has_quorum():
        return Condition("Available", "True", "QuorumHealthy", healthy)
    if observed.quorum_in_doubt():
        waiting = ", ".join(observed.not_heard_from())
        return Condition("Available", "Unknown", "AwaitingProbes", f"{healthy}; not heard from: {waiting}")
    return Condition("Available", "False", "QuorumLost", healthy)


def hibernated(spec: ClusterSpec, observed: Observed) -> bool:
    """spec.hibernate, and every member stopped: phase Hibernated."""
    return spec.hibernate and not observed.running()


def _progressing(step: Step | None, message: str) -> Condition:
    if step is None:
        return Condition("Progressing", "False", "Stable", "")
    return Condition("Progressing", "True", type(step).__name__, message)


def suspended_message(step: Step | None) -> str:
    held = f"; held: {step.progress()}" if isinstance(step, Action) else ""
    return f'etcd.io/suspend is "true": the supervisor observes and changes nothing{held}'


def step_message(step: Step | None, *, healthy: int, size: int) -> str:
    if isinstance(step, Wait):
        return step.reason
    if isinstance(step, Action):
        return step.progress()
    return f"{healthy} of {size} members healthy"


def member_statuses(observed: Observed) -> tuple[MemberStatus, ...]:
    leader = observed.leader_id()
    statuses = []
    for m in observed.members:
        r = observed.runtime_for(m)
        role = Role.LEARNER if m.is_learner else Role.LEADER if m.id == leader else Role.FOLLOWER
        healthy = observed.healthy(m)
        statuses.append(
            MemberStatus(
                name=observed.name_of(m),
                id=f"{m.id:x}",
                peer_url=m.peer_urls[0] if m.peer_urls else (r.urls.peer_url if r else ""),
                client_url=m.client_urls[0] if m.client_urls else (r.urls.client_url if r else ""),
                role=role if healthy or role is not Role.FOLLOWER else Role.UNKNOWN,
                healthy=healthy,
                pid=r.pid if r else None,
                **_db_sizes(observed, r.name if r else ""),
                version=_version_of(observed, r.name if r else ""),
            )
        )
    if observed.etcd_members is None:  # nothing answered: show what the runtime has
        for r in observed.runtime:
            statuses.append(
                MemberStatus(r.name, "", r.urls.peer_url, r.urls.client_url, Role.UNKNOWN, False, r.pid)
            )
    return tuple(sorted(statuses, key=lambda s: s.name))


def largest_db_size(statuses: tuple[MemberStatus, ...]) -> str:
    """The largest member database file as a Kubernetes quantity ("" while none is known)."""
    largest = max((s.db_size or 0 for s in statuses), default=0)
    if not largest:
        return ""
    gib = largest / 2**30
    return f"{gib:.2f}Gi" if gib >= 1 else f"{largest / 2**20:.1f}Mi"


def _db_sizes(observed: Observed, name: str) -> dict[str, int | None]:
    h = observed.health.get(name)
    if h is None:
        return {"db_size": None, "db_size_in_use": None}
    return {"db_size": h.db_size, "db_size_in_use": h.db_size_in_use or None}


def _version_of(observed: Observed, name: str) -> str:
    h = observed.health.get(name)
    return h.version if h is not None else ""


def cluster_version(statuses: tuple[MemberStatus, ...], observed: Observed) -> str:
    """The cluster version etcd reports (the leader's /version), or, when the leader did not
    say, what etcd would decide: the lowest member version's MAJOR.MINOR.0 ("" until every
    member has reported one), or, once etcd took it down for a downgrade (a member keeps its
    data in the downgrade's target), that target."""
    reported = {h.member_id: h.cluster_version for h in observed.health.values() if h and h.cluster_version}
    if reported:
        return reported.get(observed.leader_id() or 0) or next(iter(reported.values()))
    versions = [s.version for s in statuses]
    if not versions or "" in versions:
        return ""
    versions += [
        h.downgrade_target
        for h in observed.health.values()
        if h is not None and h.downgrade_target and h.storage_version == h.downgrade_target
    ]
    major, minor = min(_major_minor(v) for v in versions)
    return f"{major}.{minor}.0"


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def upgrading_condition(spec: ClusterSpec, observed: Observed) -> Condition | None:
    """Upgrading: True while members are restarted onto the spec's configuration; False with
    why once they all run it, or when the rollout cannot go on."""
    desired = observed.desired
    if desired is None:
        return None
    outdated = observed.outdated()
    total = len(observed.runtime)
    if not outdated:
        return Condition(
            "Upgrading", "False", "UpToDate", f"every member runs etcd {spec.version} as specified"
        )
    if desired.unavailable:
        return Condition("Upgrading", "False", "VersionUnavailable", desired.unavailable)
    failing = [
        r
        for r in observed.runtime
        if r.config == desired.fingerprint
        and (r.consecutive_failures > 0 or r.name in observed.restarted_silent)
        and not observed.is_healthy(r.name)
    ]
    if failing:
        r = failing[0]
        return Condition(
            "Upgrading",
            "False",
            "MemberFailedToStart",
            f"{r.name} does not come up with the new configuration (etcd {spec.version}): {exit_story(r)};"
            f" the rollout stopped, {len(outdated)} of {total} members left as they were",
        )
    done = total - len(outdated)
    return Condition(
        "Upgrading",
        "True",
        "RollingRestart",
        f"{done} of {total} members run the new configuration (etcd {spec.version})",
    )


def not_created_status(problem: str, *, generation: int = 0, now: float) -> ClusterStatus:
    """The status of a cluster refused at creation (its only document is invalid): nothing runs,
    and why. Both modes publish it (local: the manifest follower; Kubernetes: KubeClusters)."""
    return ClusterStatus(
        observed_generation=generation,
        conditions=(invalid_spec(problem, now),),
        message=f"not created: {problem}",
    )


def invalid_spec(problem: str, now: float = 0.0) -> Condition:
    """Degraded, because the user's spec is invalid (`now`: when the condition was first seen)."""
    return Condition("Degraded", "True", "InvalidSpec", problem, now)


def _degraded(statuses: tuple[MemberStatus, ...], problem: str | None, observed: Observed) -> Condition:
    if problem:
        return invalid_spec(problem)
    if observed.desired is not None and observed.desired.unavailable:
        return Condition("Degraded", "True", "VersionUnavailable", observed.desired.unavailable)
    if unplaced := unschedulable_members(observed):
        return Condition("Degraded", "True", UNSCHEDULABLE, unplaced)
    unhealthy = sorted(s.name for s in statuses if not s.healthy)
    if unhealthy:
        return Condition("Degraded", "True", "MembersUnhealthy", "unhealthy: " + ", ".join(unhealthy))
    return Condition("Degraded", "False", "AllMembersHealthy", "")


UNSCHEDULABLE = "MemberUnschedulable"


def unschedulable_members(observed: Observed) -> str:
    """ "pod demo-3 cannot be scheduled: 0/3 nodes are available: ..." for each member whose pod
    the scheduler could not place; "" when none."""
    return "; ".join(
        f"pod {r.name} cannot be scheduled: {r.unschedulable}" for r in observed.runtime if r.unschedulable
    )


def new_warning(previous: ClusterStatus | None, status: ClusterStatus) -> Condition | None:
    """The Degraded condition to raise a warning Event for: a member newly unschedulable, or
    for another reason (the scheduler's message changed); None when it was told already."""
    now = {c.type: c for c in status.conditions}.get("Degraded")
    if now is None or now.reason != UNSCHEDULABLE:
        return None
    before = {c.type: c for c in previous.conditions}.get("Degraded") if previous else None
    if before is not None and (before.reason, before.message) == (now.reason, now.message):
        return None
    return now


def next_phase(previous: Phase | None, spec: ClusterSpec, observed: Observed, *, converged: bool) -> Phase:
    """The state machine: Creating -> Running <-> Scaling; any -> Failed -> Recovering -> Running;
    Hibernated while spec.hibernate holds every member stopped, Recovering as it wakes."""
    if hibernated(spec, observed):
        return Phase.HIBERNATED
    # spec.size counts our own voters: an adopted cluster's old members (spec.adopt) are not its
    # size, and their leaving (removeOld) is a membership change too.
    leaving = spec.adopt is not None and spec.adopt.remove_old and bool(observed.foreign_members())
    membership_changing = len(observed.own_voters()) != spec.size or bool(observed.learners()) or leaving
    if previous is None or previous is Phase.SUSPENDED:  # a fresh look: judge from what exists
        bootstrapped = observed.etcd_members is not None or any(r.has_data for r in observed.runtime)
        previous = Phase.RUNNING if bootstrapped else Phase.CREATING
    quorum_ok = observed.has_quorum()
    if (previous is Phase.HIBERNATED or observed.hibernated) and not spec.hibernate:
        # Waking: Recovering while the members come back from their data (or a backup).
        if not quorum_ok:
            return Phase.RECOVERING
        previous = Phase.RECOVERING if previous is Phase.HIBERNATED else previous
    if previous is Phase.CREATING:
        # Young, not failed: a cluster that never formed has no quorum to lose.
        return Phase.RUNNING if converged and quorum_ok else Phase.CREATING
    if not quorum_ok:
        # Members not asked yet may hold it (a daemon restarted over a running cluster): the
        # phase stays until they answered, so a restart never shows a Failed that was not.
        return previous if observed.quorum_in_doubt() else Phase.FAILED
    if previous is Phase.FAILED:
        return Phase.RECOVERING  # always shown on the way back, however quickly it goes
    if previous is Phase.RECOVERING:
        whole = converged and len(observed.healthy_own_voters()) == spec.size
        return Phase.RUNNING if whole else Phase.RECOVERING
    if converged:
        return Phase.RUNNING
    # Restarting a member is healing, not scaling: Degraded says so.
    return Phase.SCALING if membership_changing else Phase.RUNNING


def carry_transition_times(
    conditions: tuple[Condition, ...], previous: tuple[Condition, ...], now: float
) -> tuple[Condition, ...]:
    """Keep a condition's lastTransitionTime unless its status flipped (Kubernetes convention).

    The one merge of transition times: the cluster actor applies it against the status it
    published last, the Kubernetes status sink against the status stored on the object (which
    outlives the operator).
    """
    before = {c.type: c for c in previous}
    out = []
    for c in conditions:
        old = before.get(c.type)
        kept = old is not None and old.status == c.status and old.last_transition_time
        stamp = old.last_transition_time if kept and old is not None else now
        out.append(Condition(c.type, c.status, c.reason, c.message, stamp))
    return tuple(out)


def stamp_unset(conditions: tuple[Condition, ...], now: float) -> tuple[Condition, ...]:
    """Conditions with no lastTransitionTime stamped `now`, the others as they are: what a
    status writer does that has nothing to carry times from, so a status built outside
    assess() (a cluster refused at creation) never shows the epoch."""
    return tuple(
        c if c.last_transition_time else Condition(c.type, c.status, c.reason, c.message, now)
        for c in conditions
    )

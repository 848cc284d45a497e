"""Cluster metrics, derived from what the actors already publish: no counter lives in pure code.

`ClusterMetrics` sits between the cluster actors and the real sinks (status.json, the status
subresource, Events): it passes every status and Event on, and remembers what it needs. Its
per-cluster child (`child`) registers the cluster's `ObservedFeed` and desired spec, read only when
Prometheus scrapes. So:

- statuses give the phase, ready members, leader changes, heal times, the backup status;
- Events (the audit trail: one per operation) give operations by kind and result, and the
  numbers measured beside them (`actors/measurements.py`): bytes reclaimed, backup durations,
  verification results;
- the latest `Observed` gives voting and healthy members, database sizes, versions.

A new operation is one line in `EVENT_OPERATIONS` (an action needs none: every action class joins
`Action.kinds` as it is defined, and its `event_reason` and `failure_reason` are read from it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import trio
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

import actors.plan  # noqa: F401  every action a planner returns is defined, so in Action.kinds
from actors.actions import Action
from actors.cluster_context import ClusterContext
from actors.measurements import BackupMeasured, Defragmented, Measurement, Verification
from actors.model import ClusterRef, ClusterStatus
from actors.observed import quorum
from actors.ports import EventSink, StatusSink
from supervisor.runtime import ChildSpec

PREFIX = "etcd_supervisor"
CLUSTER = ("namespace", "cluster")
MEMBER = (*CLUSTER, "member")

# Events that are not an action's: reason -> (operation, result).
EVENT_OPERATIONS: dict[str, tuple[str, str]] = {
    "BackupSucceeded": ("backup", "succeeded"),
    "BackupFailed": ("backup", "failed"),
    "BackupRetrying": ("backup", "retrying"),
    "BackupDeleted": ("backup_retention", "succeeded"),
    "DeltaBackupVerified": ("delta_verification", "succeeded"),
    "DeltaVerificationFailed": ("delta_verification", "failed"),
    "DeltaVerificationSkipped": ("delta_verification", "skipped"),
    "CertificatesRenewed": ("certificate_renewal", "succeeded"),
    "CertificatesRenewalFailed": ("certificate_renewal", "failed"),
}

BACKUP_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800)

# From a member seen unhealthy to healthy again: seconds to minutes.
HEAL_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
RECOVERY_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200)


def operation_of(reason: str) -> tuple[str, str] | None:
    """(operation, result) an Event reason stands for; None for other Events (phases, bad specs)."""
    known = EVENT_OPERATIONS.get(reason)
    if known is not None:
        return known
    for name, cls in Action.kinds.items():
        # The class that names the reason, not a subclass inheriting it (MoveLeaderToDefrag).
        if cls.__dict__.get("event_reason") == reason:
            return name, "succeeded"
        if reason == f"{name}Failed":
            return name, "failed"
    return None


def _labels(ref: ClusterRef) -> tuple[str, str]:
    return ref.namespace, ref.name


class _Memory:
    """What one cluster's statuses taught: its leader, and which members are down since when."""

    def __init__(self) -> None:
        self.leader: str | None = None
        self.seen_healthy: set[str] = set()
        self.down_since: dict[str, float] = {}
        self.had_quorum = False  # a bootstrap is not a recovery either
        self.quorum_lost_at: float | None = None


class ClusterMetrics:
    """The sinks' wrapper, the per-cluster child factory and the scrape-time collector."""

    def __init__(
        self,
        registry: CollectorRegistry,
        status: StatusSink,
        events: EventSink,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._status, self._events, self._clock = status, events, clock
        self.statuses: dict[ClusterRef, ClusterStatus] = {}
        self._memory: dict[ClusterRef, _Memory] = {}
        self._contexts: dict[ClusterRef, ClusterContext] = {}
        self.leader_changes = Counter(
            f"{PREFIX}_leader_changes", "Leader changes the supervisor saw", CLUSTER, registry=registry
        )
        self.operations = Counter(
            f"{PREFIX}_operations",
            "Operations on a cluster (membership steps, backups...) by kind and result",
            (*CLUSTER, "operation", "result"),
            registry=registry,
        )
        self.reclaimed = Counter(
            f"{PREFIX}_defrag_reclaimed_bytes",
            "Database bytes defragmentation gave back",
            CLUSTER,
            registry=registry,
        )
        self.verifications = Counter(
            f"{PREFIX}_backup_verifications",
            "Backups verified (restored and HashKV compared with the source) by result: "
            "passed, failed (did not restore or differs), inconclusive (nothing to compare with)",
            (*CLUSTER, "result"),
            registry=registry,
        )
        self.backup_duration = Histogram(
            f"{PREFIX}_backup_duration_seconds",
            "A successful backup, from its start to the snapshot stored (and verified)",
            CLUSTER,
            buckets=BACKUP_BUCKETS,
            registry=registry,
        )
        self.heal = Histogram(
            f"{PREFIX}_member_heal_duration_seconds",
            "From a member seen unhealthy to healthy again",
            CLUSTER,
            buckets=HEAL_BUCKETS,
            registry=registry,
        )
        self.recovery = Histogram(
            f"{PREFIX}_quorum_recovery_duration_seconds",
            "From quorum lost (fewer healthy voters than quorum) to quorum held again",
            CLUSTER,
            buckets=RECOVERY_BUCKETS,
            registry=registry,
        )
        registry.register(_ClusterCollector(self))

    # --- the sinks -----------------------------------------------------------------------------

    async def publish(self, cluster: ClusterRef, status: ClusterStatus) -> None:
        self._learn(cluster, status)
        await self._status.publish(cluster, status)

    async def record(
        self,
        cluster: ClusterRef,
        *,
        reason: str,
        message: str,
        warning: bool = False,
        measured: Measurement | None = None,
    ) -> None:
        operation = operation_of(reason)
        if operation is not None:
            self.operations.labels(*_labels(cluster), *operation).inc()
        if measured is not None:
            self._count(cluster, measured)
        await self._events.record(cluster, reason=reason, message=message, warning=warning, measured=measured)

    def _count(self, cluster: ClusterRef, measured: Measurement) -> None:
        labels = _labels(cluster)
        match measured:
            case Defragmented(reclaimed_bytes=reclaimed):
                self.reclaimed.labels(*labels).inc(max(reclaimed, 0))  # a counter never goes down
            case BackupMeasured(seconds=seconds, verification=verification):
                if seconds is not None:
                    self.backup_duration.labels(*labels).observe(seconds)
                if verification is not None:
                    self.verifications.labels(*labels, verification.value).inc()

    def forget(self, cluster: ClusterRef) -> None:
        """The cluster is gone: its series go too (labels stay bounded by the clusters that exist)."""
        self.statuses.pop(cluster, None)
        self._memory.pop(cluster, None)
        for metric in (
            self.leader_changes,
            self.operations,
            self.reclaimed,
            self.verifications,
            self.backup_duration,
            self.heal,
            self.recovery,
        ):
            for labels in list(metric._metrics):  # prometheus-client has no remove-by-prefix
                if labels[:2] == _labels(cluster):
                    metric.remove(*labels)

    def _learn(self, cluster: ClusterRef, status: ClusterStatus) -> None:
        self.statuses[cluster] = status
        memory = self._memory.setdefault(cluster, _Memory())
        leader = next((m.name for m in status.members if m.role == "leader"), None)
        if leader is not None:
            if memory.leader is not None and leader != memory.leader:
                self.leader_changes.labels(*_labels(cluster)).inc()
            memory.leader = leader
        now = self._clock()
        self._learn_quorum(cluster, status, memory, now)
        self._learn_heals(cluster, status, memory, now)

    def _learn_quorum(self, cluster: ClusterRef, status: ClusterStatus, memory: _Memory, now: float) -> None:
        voters = [m for m in status.members if m.role != "learner"]
        held = bool(voters) and sum(m.healthy for m in voters) >= quorum(len(voters))
        if held:
            if memory.quorum_lost_at is not None:
                self.recovery.labels(*_labels(cluster)).observe(now - memory.quorum_lost_at)
            memory.had_quorum, memory.quorum_lost_at = True, None
        elif memory.had_quorum and memory.quorum_lost_at is None:
            memory.quorum_lost_at = now

    def _learn_heals(self, cluster: ClusterRef, status: ClusterStatus, memory: _Memory, now: float) -> None:
        names = {m.name for m in status.members}
        for m in status.members:
            if m.healthy:
                since = memory.down_since.pop(m.name, None)
                if since is not None:
                    self.heal.labels(*_labels(cluster)).observe(now - since)
                memory.seen_healthy.add(m.name)
            elif m.name in memory.seen_healthy:  # a bootstrap is not a heal
                memory.down_since.setdefault(m.name, now)
        for gone in set(memory.down_since) - names:
            del memory.down_since[gone]
        memory.seen_healthy &= names

    # --- the per-cluster child -----------------------------------------------------------------

    def child(self, context: ClusterContext) -> ChildSpec:
        """Registers the cluster's feed and desired spec for scrapes, for as long as it runs."""

        async def start(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            self._contexts[context.ref] = context
            # Every result at 0 from the start, so the first failure is an increase() for the alert.
            for result in Verification:
                self.verifications.labels(*_labels(context.ref), result.value)
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                if self._contexts.get(context.ref) is context:
                    del self._contexts[context.ref]

        return ChildSpec("metrics", start, shutdown=0.1)

    def contexts(self) -> list[ClusterContext]:
        return list(self._contexts.values())

    def verifies(self, ref: ClusterRef) -> bool:
        """Whether the cluster's backups are verified (spec.backup.verify) as far as known."""
        context = self._contexts.get(ref)
        backup = context.desired().resource.spec.backup if context is not None else None
        return backup is not None and backup.verify


class _ClusterCollector(Collector):
    """Gauges read at scrape time from the latest statuses and Observed of every cluster."""

    def __init__(self, metrics: ClusterMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        yield from self._from_statuses()
        yield from self._from_observed()

    def _from_statuses(self) -> Iterator[Metric]:
        ready = GaugeMetricFamily(
            f"{PREFIX}_cluster_ready_members", "Members ready (status.readyReplicas)", labels=CLUSTER
        )
        phase = GaugeMetricFamily(
            f"{PREFIX}_cluster_phase", "1, labelled with the cluster's phase", labels=(*CLUSTER, "phase")
        )
        healthy = GaugeMetricFamily(f"{PREFIX}_member_healthy", "1 when the member answers", labels=MEMBER)
        expiry = GaugeMetricFamily(
            f"{PREFIX}_certificate_expiry_timestamp_seconds",
            "When the cluster's CA (kind=ca) and its earliest leaf certificate (kind=leaf) expire",
            labels=(*CLUSTER, "kind"),
        )
        backups = _BackupFamilies()
        for ref, status in sorted(self._metrics.statuses.items()):
            labels = _labels(ref)
            ready.add_metric(labels, status.ready_replicas)
            # Only the phase it is in: a series per possible phase would multiply a big fleet's
            # scrape for zeros (the previous phase's series goes stale in Prometheus).
            phase.add_metric((*labels, status.phase.value), 1.0)
            for m in status.members:
                healthy.add_metric((*labels, m.name), 1.0 if m.healthy else 0.0)
            if status.backup is not None:
                backups.add(labels, status, verify=self._metrics.verifies(ref))
            if status.tls is not None:  # status.tls, as the renewal child last read it
                expiry.add_metric((*labels, "ca"), status.tls.ca_not_after)
                expiry.add_metric((*labels, "leaf"), status.tls.leaf_not_after)
        yield from (ready, phase, healthy, expiry, *backups.families())

    def _from_observed(self) -> Iterator[Metric]:
        desired = GaugeMetricFamily(f"{PREFIX}_cluster_desired_members", "spec.size", labels=CLUSTER)
        voting = GaugeMetricFamily(
            f"{PREFIX}_cluster_voting_members", "Voting members in etcd's list", labels=CLUSTER
        )
        voting_healthy = GaugeMetricFamily(
            f"{PREFIX}_cluster_healthy_voting_members", "Voting members that answer", labels=CLUSTER
        )
        quorum_size = GaugeMetricFamily(
            f"{PREFIX}_cluster_quorum", "Voting members quorum needs", labels=CLUSTER
        )
        has_leader = GaugeMetricFamily(
            f"{PREFIX}_cluster_has_leader", "1 when a member knows a leader", labels=CLUSTER
        )
        db = GaugeMetricFamily(f"{PREFIX}_member_db_size_bytes", "Database file size", labels=MEMBER)
        in_use = GaugeMetricFamily(
            f"{PREFIX}_member_db_size_in_use_bytes", "Database bytes in use", labels=MEMBER
        )
        version = InfoMetricFamily(f"{PREFIX}_member_version", "etcd version a member runs", labels=MEMBER)
        wanted = InfoMetricFamily(
            f"{PREFIX}_cluster_version", "etcd version the spec asks for", labels=CLUSTER
        )
        for context in sorted(self._metrics.contexts(), key=lambda c: c.ref):
            labels = _labels(context.ref)
            spec = context.desired().resource.spec
            desired.add_metric(labels, spec.size)
            wanted.add_metric(labels, {"version": spec.version})
            observed = context.feed.latest
            if observed is None:
                continue
            voters = observed.voters()
            healthy = [v for v in voters if (r := observed.runtime_for(v)) and observed.is_healthy(r.name)]
            voting.add_metric(labels, len(voters))
            voting_healthy.add_metric(labels, len(healthy))
            quorum_size.add_metric(labels, quorum(len(voters)) if voters else 0)
            answers = [h for h in observed.health.values() if h is not None and not h.errors]
            has_leader.add_metric(labels, 1.0 if any(h.leader_id for h in answers) else 0.0)
            for name, h in sorted(observed.health.items()):
                if h is None:
                    continue
                db.add_metric((*labels, name), h.db_size)
                in_use.add_metric((*labels, name), h.db_size_in_use)
                if h.version:
                    version.add_metric((*labels, name), {"version": h.version})
        yield from (desired, voting, voting_healthy, quorum_size, has_leader, db, in_use, version, wanted)


class _BackupFamilies:
    def __init__(self) -> None:
        labels = CLUSTER
        self.last_time = GaugeMetricFamily(
            f"{PREFIX}_backup_last_success_timestamp_seconds",
            "When the last good backup completed",
            labels=labels,
        )
        self.revision = GaugeMetricFamily(
            f"{PREFIX}_backup_last_success_revision", "Store revision of the last good backup", labels=labels
        )
        self.size = GaugeMetricFamily(
            f"{PREFIX}_backup_last_size_bytes", "Size of the last good backup", labels=labels
        )
        self.verified = GaugeMetricFamily(
            f"{PREFIX}_backup_last_verified",
            "1 when the last good backup was restored and checked",
            labels=labels,
        )
        self.failures = GaugeMetricFamily(
            f"{PREFIX}_backup_consecutive_failures", "Backups failed in a row", labels=labels
        )

    def add(self, labels: tuple[str, str], status: ClusterStatus, *, verify: bool) -> None:
        backup = status.backup
        assert backup is not None
        self.failures.add_metric(labels, backup.consecutive_failures)
        last = backup.last_successful_backup
        if last is not None:
            self.last_time.add_metric(labels, last.completion_time)
            self.revision.add_metric(labels, last.revision)
            self.size.add_metric(labels, last.size_bytes)
            if verify:  # unverified is only news when verification was asked for
                self.verified.add_metric(labels, 1.0 if last.verified else 0.0)

    def families(self) -> tuple[Metric, ...]:
        return (self.last_time, self.revision, self.size, self.verified, self.failures)

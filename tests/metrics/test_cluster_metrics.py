"""Cluster metrics derived from the statuses and Events the actors publish (no I/O)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from actors.measurements import BackupMeasured, Defragmented, Measurement, Verification
from actors.model import ClusterRef, ClusterStatus, MemberStatus, Phase, Role
from supervisor.metrics.clusters import ClusterMetrics, operation_of

REF = ClusterRef("default", "demo")
LABELS = {"namespace": "default", "cluster": "demo"}


class Recorder:
    def __init__(self) -> None:
        self.statuses: list[ClusterStatus] = []
        self.events: list[str] = []
        self.measured: list[Measurement | None] = []

    async def publish(self, cluster: ClusterRef, status: ClusterStatus) -> None:
        self.statuses.append(status)

    async def record(
        self,
        cluster: ClusterRef,
        *,
        reason: str,
        message: str,
        warning: bool = False,
        measured: Measurement | None = None,
    ) -> None:
        self.events.append(reason)
        self.measured.append(measured)


def status(*members: tuple[str, Role, bool], phase: Phase = Phase.RUNNING) -> ClusterStatus:
    return ClusterStatus(
        phase=phase,
        ready_replicas=sum(healthy for _, _, healthy in members),
        members=tuple(MemberStatus(n, "1", "p", "c", role, healthy) for n, role, healthy in members),
    )


def test_event_reasons_name_operations_and_results() -> None:
    assert operation_of("LearnerAdded") == ("AddLearner", "succeeded")
    assert operation_of("AddLearnerFailed") == ("AddLearner", "failed")
    assert operation_of("BackupFailed") == ("backup", "failed")
    assert operation_of("DeltaVerificationFailed") == ("delta_verification", "failed")
    assert operation_of("CertificatesRenewed") == ("certificate_renewal", "succeeded")
    assert operation_of("CertificatesRenewalFailed") == ("certificate_renewal", "failed")
    assert operation_of("PhaseRunning") is None
    assert operation_of("LeaderMoved") == ("MoveLeader", "succeeded")  # not MoveLeaderToDefrag
    assert operation_of("MemberDefragmented") == ("DefragMember", "succeeded")
    assert operation_of("NospaceAlarmDisarmed") == ("DisarmNospace", "succeeded")


async def test_statuses_and_events_become_series_and_pass_through() -> None:
    now = [1000.0]
    registry, inner = CollectorRegistry(), Recorder()
    metrics = ClusterMetrics(registry, inner, inner, clock=lambda: now[0])
    get = registry.get_sample_value
    L, F = Role.LEADER, Role.FOLLOWER

    # Bootstrap: members not yet healthy are not "healing".
    await metrics.publish(REF, status(("demo-0", L, True), ("demo-1", F, False), phase=Phase.CREATING))
    await metrics.publish(REF, status(("demo-0", L, True), ("demo-1", F, True)))
    assert get("etcd_supervisor_member_heal_duration_seconds_count", LABELS) is None
    # demo-0 dies at t=1000, demo-1 takes over; demo-0 is back 7 s later.
    await metrics.publish(REF, status(("demo-0", F, False), ("demo-1", L, True)))
    now[0] = 1007.0
    await metrics.publish(REF, status(("demo-0", F, True), ("demo-1", L, True)))
    assert get("etcd_supervisor_member_heal_duration_seconds_count", LABELS) == 1
    assert get("etcd_supervisor_member_heal_duration_seconds_sum", LABELS) == 7.0
    assert get("etcd_supervisor_leader_changes_total", LABELS) == 1
    assert get("etcd_supervisor_cluster_ready_members", LABELS) == 2
    assert get("etcd_supervisor_cluster_phase", {**LABELS, "phase": "Running"}) == 1
    assert get("etcd_supervisor_cluster_phase", {**LABELS, "phase": "Creating"}) is None
    assert get("etcd_supervisor_member_healthy", {**LABELS, "member": "demo-0"}) == 1

    # Two members, one down: that was quorum lost too, for the same 7 s.
    assert get("etcd_supervisor_quorum_recovery_duration_seconds_sum", LABELS) == 7.0
    # Two of three down at t=1010 (quorum lost), one back at t=1040: 30 s without quorum.
    now[0] = 1010.0
    await metrics.publish(REF, status(("demo-0", F, False), ("demo-1", F, False), ("demo-2", L, True)))
    now[0] = 1040.0
    await metrics.publish(REF, status(("demo-0", F, True), ("demo-1", F, False), ("demo-2", L, True)))
    assert get("etcd_supervisor_quorum_recovery_duration_seconds_sum", LABELS) == 37.0
    assert get("etcd_supervisor_quorum_recovery_duration_seconds_count", LABELS) == 2

    await metrics.record(REF, reason="MemberRestarted", message="restarted demo-0")
    await metrics.record(REF, reason="RestartMemberFailed", message="no", warning=True)
    # The numbers come as data beside the Event; the message is for people and never parsed.
    defragged = Defragmented(reclaimed_bytes=4194304, seconds=0.1)
    await metrics.record(REF, reason="MemberDefragmented", message="reclaimed 1 byte", measured=defragged)
    shrunk_meanwhile = Defragmented(reclaimed_bytes=-5, seconds=0.1)  # writes grew it: nothing given back
    await metrics.record(REF, reason="MemberDefragmented", message="m", measured=shrunk_meanwhile)
    assert get("etcd_supervisor_defrag_reclaimed_bytes_total", LABELS) == 4194304
    taken = BackupMeasured(seconds=2.5, verification=Verification.PASSED)
    await metrics.record(REF, reason="BackupSucceeded", message="took 9.99s", measured=taken)
    assert get("etcd_supervisor_backup_duration_seconds_sum", LABELS) == 2.5
    differs = BackupMeasured(verification=Verification.FAILED)  # a failed backup has no duration
    await metrics.record(REF, reason="BackupFailed", message="x", warning=True, measured=differs)
    unverified = BackupMeasured(seconds=1.0)  # verify off: no verification result
    await metrics.record(REF, reason="BackupSucceeded", message="y", measured=unverified)
    assert get("etcd_supervisor_backup_duration_seconds_count", LABELS) == 2
    verifications = "etcd_supervisor_backup_verifications_total"
    assert get(verifications, {**LABELS, "result": "passed"}) == 1
    assert get(verifications, {**LABELS, "result": "failed"}) == 1
    assert get(verifications, {**LABELS, "result": "inconclusive"}) is None
    ok = {**LABELS, "operation": "RestartMember", "result": "succeeded"}
    assert get("etcd_supervisor_operations_total", ok) == 1
    assert get("etcd_supervisor_operations_total", {**ok, "result": "failed"}) == 1
    # Everything reached the real sinks.
    assert len(inner.statuses) == 6 and inner.events == [
        "MemberRestarted",
        "RestartMemberFailed",
        "MemberDefragmented",
        "MemberDefragmented",
        "BackupSucceeded",
        "BackupFailed",
        "BackupSucceeded",
    ]
    assert inner.measured[-3:] == [taken, differs, unverified]

    metrics.forget(REF)  # a cluster torn down takes its series with it
    assert get("etcd_supervisor_leader_changes_total", LABELS) is None
    assert get("etcd_supervisor_cluster_ready_members", LABELS) is None
    assert get("etcd_supervisor_operations_total", ok) is None
    assert get(verifications, {**LABELS, "result": "passed"}) is None


async def test_certificate_expiry_is_read_from_status_tls() -> None:
    from actors.model import TlsStatus

    registry, inner = CollectorRegistry(), Recorder()
    metrics = ClusterMetrics(registry, inner, inner)
    get = registry.get_sample_value
    name = "etcd_supervisor_certificate_expiry_timestamp_seconds"
    await metrics.publish(REF, status(("demo-0", Role.LEADER, True)))
    assert get(name, {**LABELS, "kind": "leaf"}) is None  # no status.tls yet: no series
    await metrics.publish(REF, ClusterStatus(tls=TlsStatus(ca_not_after=2e9, leaf_not_after=1.8e9)))
    assert get(name, {**LABELS, "kind": "ca"}) == 2e9
    assert get(name, {**LABELS, "kind": "leaf"}) == 1.8e9

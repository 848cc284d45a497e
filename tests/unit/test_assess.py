"""assess(): the status a cluster shows, from hand-built observations."""

import attrs

from actors.actions import AddLearner, StartMember
from actors.assess import assess, carry_transition_times, new_warning, not_created_status, too_soon_to_tell
from actors.codec import status_to_dict
from actors.model import ClusterSpec, Condition, Phase, Role
from tests.unit.facts import EXITED, STARTING, cluster, em, hl, observed, rt


def status(size, observed_parts, previous, step):
    runtime, members, health = observed_parts
    return assess(
        ClusterSpec(size=size),
        observed(runtime, members, health),
        previous=previous,
        generation=7,
        step=step,
        now=50.0,
    )


def test_phases_follow_the_state_machine():
    assert status(3, cluster(1), Phase.CREATING, AddLearner("demo-1")).phase is Phase.CREATING
    assert status(3, cluster(3), Phase.CREATING, None).phase is Phase.RUNNING
    assert status(5, cluster(3), Phase.RUNNING, AddLearner("demo-3")).phase is Phase.SCALING
    runtime, members, health = cluster(3)
    runtime[1], runtime[2] = rt(1, EXITED), rt(2, EXITED)
    lost = (runtime, members, {"demo-0": health["demo-0"]})
    failed = status(3, lost, Phase.RUNNING, StartMember("demo-1", (), "x"))
    assert failed.phase is Phase.FAILED
    available = {c.type: c for c in failed.conditions}["Available"]
    assert (available.status, available.reason) == ("False", "QuorumLost")
    runtime[1] = rt(1)
    partial = (runtime, members, {**lost[2], "demo-1": hl(1)})
    assert status(3, partial, Phase.FAILED, StartMember("demo-2", (), "x")).phase is Phase.RECOVERING
    assert status(3, cluster(3), Phase.RECOVERING, None).phase is Phase.RUNNING


def test_status_reports_roles_health_and_ready_replicas():
    runtime, members, health = cluster(3, leader=1)
    runtime[2] = rt(2, EXITED)
    del health["demo-2"]
    result = status(3, (runtime, members, health), Phase.RUNNING, StartMember("demo-2", (), "restart"))
    assert [(m.name, m.role, m.healthy) for m in result.members] == [
        ("demo-0", Role.FOLLOWER, True),
        ("demo-1", Role.LEADER, True),
        ("demo-2", Role.UNKNOWN, False),
    ]
    assert result.ready_replicas == 2 and result.observed_generation == 7
    assert result.phase is Phase.RUNNING  # healing, not scaling
    degraded = {c.type: c for c in result.conditions}["Degraded"]
    assert (degraded.status, degraded.message) == ("True", "unhealthy: demo-2")


def test_an_invalid_edit_is_reported_over_the_usual_status():
    runtime, members, health = cluster(3)
    result = assess(
        ClusterSpec(size=3),
        observed(runtime, members, health),
        previous=Phase.RUNNING,
        generation=2,
        step=None,
        now=50.0,
        problem="spec.size: must be 1..9",
    )
    degraded = {c.type: c for c in result.conditions}["Degraded"]
    assert (degraded.status, degraded.reason, degraded.message) == (
        "True",
        "InvalidSpec",
        "spec.size: must be 1..9",
    )
    assert result.message == "latest spec rejected, still serving the previous one: spec.size: must be 1..9"
    assert result.phase is Phase.RUNNING  # the cluster keeps serving its last good spec


def test_a_transition_time_holds_while_the_status_holds_and_moves_when_it_flips():
    before = (
        Condition("Available", "True", "QuorumHealthy", "", 10.0),
        Condition("Degraded", "False", "x", "", 0.0),
    )
    now = (Condition("Available", "True", "QuorumHealthy"), Condition("Degraded", "True", "y"))
    carried = carry_transition_times(now, before, 99.0)
    assert [c.last_transition_time for c in carried] == [10.0, 99.0]
    # A stored condition without a time (never stamped) does not pin 1970 on the new one.
    unstamped = carry_transition_times((Condition("Degraded", "False", "x"),), before, 77.0)
    assert unstamped[0].last_transition_time == 77.0


def test_the_largest_member_database_is_the_clusters_db_size():
    runtime, members, health = cluster(3)
    health["demo-1"] = attrs.evolve(health["demo-1"], db_size=180 * 2**20 + 2**19)
    health["demo-2"] = attrs.evolve(health["demo-2"], db_size=3 * 2**30)
    assert status(3, (runtime, members, health), Phase.RUNNING, None).db_size == "3.00Gi"
    del health["demo-2"]  # unreachable: its size is unknown
    shown = status(3, (runtime, members, health), Phase.RUNNING, None)
    assert shown.db_size == "180.5Mi" and status_to_dict(shown)["dbSize"] == "180.5Mi"
    assert status(3, (runtime, members, {}), Phase.RUNNING, None).db_size == ""


def test_members_not_asked_yet_keep_the_phase_instead_of_failing_it():
    # A daemon restarted over a running cluster: its first look has the runtime and etcd's list
    # but no probe answer yet. Not heard from is not down.
    runtime, members, health = cluster(3)
    unasked = attrs.evolve(observed(runtime, members, {}), unprobed=frozenset({"demo-0", "demo-1", "demo-2"}))
    for previous in (None, Phase.RUNNING, Phase.SCALING, Phase.RECOVERING):
        result = assess(ClusterSpec(size=3), unasked, previous=previous, generation=1, step=None, now=5.0)
        assert result.phase is (previous or Phase.RUNNING)
        available = {c.type: c for c in result.conditions}["Available"]
        assert (available.status, available.reason) == ("Unknown", "AwaitingProbes")
        assert available.message == "0 of 3 voting members healthy; not heard from: demo-0, demo-1, demo-2"
    # One answered, one not asked yet, one asked and silent: the one not asked could still
    # make a quorum, so the phase holds; once it too is silent, the quorum is known lost.
    one = {"demo-0": health["demo-0"], "demo-2": None}
    some = attrs.evolve(observed(runtime, members, one), unprobed=frozenset({"demo-1"}))
    assert some.quorum_in_doubt()
    assert attrs.evolve(some, unprobed=frozenset()).quorum_in_doubt() is False
    silent = {"demo-0": None, "demo-2": None}
    lost = attrs.evolve(observed(runtime, members, silent), unprobed=frozenset({"demo-1"}))
    assert not lost.quorum_in_doubt()
    result = assess(ClusterSpec(size=3), lost, previous=Phase.RUNNING, generation=1, step=None, now=5.0)
    assert result.phase is Phase.FAILED
    # A member not asked yet whose process is not running cannot answer: no doubt about it.
    runtime[1] = rt(1, EXITED)
    stopped = attrs.evolve(observed(runtime, members, one), unprobed=frozenset({"demo-1"}))
    assert not stopped.quorum_in_doubt()


def test_a_fresh_actor_says_nothing_until_every_running_member_was_heard_from():
    runtime, members, health = cluster(3)
    waiting = attrs.evolve(observed(runtime, members, health), unprobed=frozenset({"demo-2"}))
    assert too_soon_to_tell(None, waiting)
    assert not too_soon_to_tell(Phase.RUNNING, waiting)  # it has a status of its own: keep it current
    assert not too_soon_to_tell(None, attrs.evolve(waiting, unprobed=frozenset()))
    runtime[2] = rt(2, EXITED)  # a stopped member cannot answer: nothing to wait for
    stopped = attrs.evolve(observed(runtime, members, health), unprobed=frozenset({"demo-2"}))
    assert not too_soon_to_tell(None, stopped)


def test_a_cluster_refused_at_creation_shows_why_and_runs_nothing():
    status = not_created_status(
        "spec.size: must be between 1 and 9 (got 0)", generation=3, now=1_700_000_000.0
    )
    assert status.phase is Phase.CREATING and status.members == ()
    assert status.observed_generation == 3
    assert status.message == "not created: spec.size: must be between 1 and 9 (got 0)"
    assert status.conditions == (
        Condition(
            "Degraded", "True", "InvalidSpec", "spec.size: must be between 1 and 9 (got 0)", 1_700_000_000.0
        ),
    )


def test_a_tls_cluster_shows_its_certificates_and_whether_they_are_valid():
    from actors.certificates import Certificate, CertificateState, TlsReport

    report = TlsReport(
        CertificateState(Certificate("ca", 0.0, 10_000.0), (Certificate("demo-0", 0.0, 30.0),))
    )

    def with_tls(spec: ClusterSpec):
        return assess(
            spec, observed(*cluster(3)), previous=Phase.RUNNING, generation=1, step=None, now=50.0, tls=report
        )

    result = with_tls(ClusterSpec(size=3))
    assert result.tls is not None and (result.tls.ca_not_after, result.tls.leaf_not_after) == (10_000.0, 30.0)
    valid = {c.type: c for c in result.conditions}["CertificatesValid"]
    assert (valid.status, valid.reason) == ("False", "CertificateExpired")
    plain = with_tls(ClusterSpec(size=3, tls_enabled=False))
    assert plain.tls is None and "CertificatesValid" not in {c.type for c in plain.conditions}

    # Certificates the user brings, never usable yet: the refusal is said, no dates shown.
    never = TlsReport(None, failure="secretRef: my-tls: missing peer.key", source="my-tls")
    brought = assess(
        ClusterSpec(size=3, tls_secret="my-tls"),
        observed(*cluster(3)),
        previous=Phase.RUNNING,
        generation=1,
        step=None,
        now=50.0,
        tls=never,
    )
    said = {c.type: c for c in brought.conditions}["CertificatesValid"]
    assert brought.tls is None and (said.reason, said.message) == ("SecretInvalid", never.failure)


def test_a_cluster_version_unknown_for_a_moment_keeps_the_one_shown():
    # Mid-rollout, under load: the leader's answer is stale and a restarting member has no
    # version yet. The status keeps the version it showed instead of flickering to "".
    runtime, members, health = cluster(3)
    health = {n: attrs.evolve(h, version="3.5.35") for n, h in health.items()}
    health["demo-2"] = None
    unknown = observed(runtime, members, health)
    shown = assess(
        ClusterSpec(size=3),
        unknown,
        previous=Phase.RUNNING,
        generation=1,
        step=None,
        now=5.0,
        previous_version="3.5.0",
    )
    assert shown.version == "3.5.0"
    fresh = assess(ClusterSpec(size=3), unknown, previous=None, generation=1, step=None, now=5.0)
    assert fresh.version == ""  # nothing known yet, nothing shown
    known = {n: h or attrs.evolve(hl(2), version="3.6.16") for n, h in health.items()}
    moved_on = assess(
        ClusterSpec(size=3),
        observed(runtime, members, known),
        previous=Phase.RUNNING,
        generation=1,
        step=None,
        now=5.0,
        previous_version="3.4.0",
    )
    assert moved_on.version == "3.5.0"  # a version known again replaces the one shown


def test_a_member_that_cannot_be_scheduled_is_degraded_with_the_schedulers_reason_and_warned_once():
    runtime, members, health = cluster(3)
    why = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    runtime.append(attrs.evolve(rt(3, STARTING, has_data=False), unschedulable=why))
    members.append(em(3, learner=True, started=False))
    result = status(4, (runtime, members, health), Phase.RUNNING, None)
    degraded = {c.type: c for c in result.conditions}["Degraded"]
    assert (degraded.status, degraded.reason) == ("True", "MemberUnschedulable")
    assert degraded.message == f"pod demo-3 cannot be scheduled: {why}"
    # A warning Event when it first shows, not again while it holds.
    assert new_warning(None, result) == degraded
    assert new_warning(result, result) is None
    placed = status(4, cluster(3), Phase.RUNNING, None)
    assert new_warning(result, placed) is None and new_warning(placed, result) == degraded

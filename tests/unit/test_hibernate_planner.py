"""spec.hibernate, decided from hand-built observations: a final backup first, then every member
stopped (the leader last), then nothing at all; waking from the data, or from the backup when the
data is gone."""

import attrs

from actors.actions import StartMember, StopMembers, Wait
from actors.assess import assess
from actors.model import BackupSpec, ClusterSpec, LastBackup, LocalStore, Phase, StoreSpec
from actors.plan import plan
from actors.plan.hibernate import HIBERNATED, hibernate
from actors.recovery import RecoverFromBackup
from tests.unit.facts import ABSENT, EXITED, cluster, observed, rt

BACKED_UP = ClusterSpec(size=3, backup=BackupSpec(store=StoreSpec(local=LocalStore("/backups"))))
ASLEEP = attrs.evolve(BACKED_UP, hibernate=True)
FINAL = LastBackup("default/demo/final.db", 77, 4096, True, 1000.0)


def running(leader=0):
    return observed(*cluster(3, leader=leader))


def stopped(has_data=True, state=EXITED):
    return observed([rt(i, state, has_data=has_data) for i in range(3)], None, {})


def test_an_awake_cluster_is_none_of_its_business():
    assert hibernate(BACKED_UP, running()) is None
    assert hibernate(BACKED_UP, stopped()) is None  # the bootstrap planner restarts them


def test_with_a_backup_the_members_run_until_the_final_backup_is_reported():
    step = plan(ASLEEP, running())
    assert isinstance(step, Wait) and "final backup" in step.reason


def test_then_every_member_stops_in_one_step_the_leader_last():
    step = plan(ASLEEP, attrs.evolve(running(leader=0), final_backup=FINAL))
    assert step == StopMembers(("demo-1", "demo-2", "demo-0"), backup=FINAL.key)
    assert "final backup default/demo/final.db" in step.describe()


def test_without_spec_backup_the_members_stop_at_once_and_the_event_says_no_backup_was_taken():
    step = plan(ClusterSpec(size=3, hibernate=True), running(leader=2))
    assert isinstance(step, StopMembers) and step.names == ("demo-0", "demo-1", "demo-2")
    assert "spec.backup is not set" in step.describe()


def test_a_cluster_without_quorum_cannot_be_backed_up_and_is_stopped_anyway():
    runtime, members, health = cluster(3)
    runtime[1], runtime[2] = rt(1, EXITED), rt(2, EXITED)
    step = plan(ASLEEP, observed(runtime, members, {"demo-0": health["demo-0"]}))
    assert step == StopMembers(("demo-0",), backup="", without="no final backup: the cluster has no quorum")


def test_a_hibernated_cluster_takes_no_step_and_shows_hibernated():
    asleep = stopped()
    step = plan(ASLEEP, asleep)
    assert step == Wait(HIBERNATED)
    status = assess(ASLEEP, asleep, previous=Phase.RUNNING, generation=2, step=step, now=5.0)
    assert status.phase is Phase.HIBERNATED
    progressing = {c.type: c for c in status.conditions}["Progressing"]
    assert progressing.status == "False"
    # Volumes gone while hibernated: still hibernated, nothing rebuilt until it is woken.
    assert plan(ASLEEP, attrs.evolve(stopped(has_data=False), hibernated=True)) == Wait(HIBERNATED)


def test_waking_restarts_the_members_from_their_data_and_shows_recovering():
    woken = attrs.evolve(stopped(), hibernated=True)
    step = plan(BACKED_UP, woken)
    assert isinstance(step, StartMember) and step.name == "demo-0"
    status = assess(BACKED_UP, woken, previous=Phase.HIBERNATED, generation=3, step=step, now=5.0)
    assert status.phase is Phase.RECOVERING


def test_waking_without_data_restores_the_newest_verified_backup_even_in_manual_mode():
    gone = attrs.evolve(stopped(has_data=False), hibernated=True, newest_verified_backup=FINAL)
    step = plan(BACKED_UP, gone)
    assert isinstance(step, RecoverFromBackup)
    assert (step.source.key, step.revision, step.stale) == (FINAL.key, 77, ("demo-0", "demo-1", "demo-2"))
    # Volumes deleted outright (Kubernetes: no pod, no claim): the same.
    nothing = attrs.evolve(
        observed([], None, {}), hibernated=True, had_members=True, newest_verified_backup=FINAL
    )
    assert isinstance(plan(BACKED_UP, nothing), RecoverFromBackup)
    # A cluster never hibernated keeps to spec.disasterRecovery (Manual: a person decides).
    not_hibernated = attrs.evolve(gone, hibernated=False)
    assert isinstance(plan(BACKED_UP, not_hibernated), Wait)


def test_absent_members_with_data_count_as_stopped():
    # Kubernetes: a hibernated member is a claim without a pod.
    assert plan(ASLEEP, stopped(state=ABSENT)) == Wait(HIBERNATED)

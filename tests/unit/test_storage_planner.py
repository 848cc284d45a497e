"""Storage changes, decided from hand-built observations: one member at a time removed (the size
planner then adds a new one on a new volume), followers first, the leader last after leadership
moved, never without a healthy quorum, nothing where volumes are unknown."""

import attrs

from actors.actions import AddLearner, MoveLeader, PromoteLearner, RemoveMember, Wait
from actors.model import ClusterSpec, StorageSpec
from actors.plan import plan
from actors.plan.storage import differs, replace_storage
from tests.unit.facts import EXITED, cluster, em, hl, observed, rt

OLD = StorageSpec(size="10Gi", storage_class_name="standard")
BIGGER = ClusterSpec(size=3, storage=StorageSpec(size="20Gi"))
FAST = ClusterSpec(size=3, storage=StorageSpec(size="10Gi", storage_class_name="fast"))


def on(volumes, leader=0, n=3):
    runtime, members, health = cluster(n, leader=leader)
    runtime = [attrs.evolve(r, volume=v) for r, v in zip(runtime, volumes, strict=True)]
    return runtime, members, health


def test_sizes_compare_as_quantities_and_a_class_only_when_the_spec_names_one():
    assert not differs(StorageSpec("10Gi", "standard"), StorageSpec("10240Mi"))
    assert differs(StorageSpec("10Gi", "standard"), StorageSpec("20Gi"))
    assert differs(StorageSpec("10Gi", "standard"), StorageSpec("10Gi", "fast"))
    assert not differs(StorageSpec("10Gi", "fast"), StorageSpec("10Gi", "fast"))


def test_nothing_to_do_when_every_volume_matches_or_none_is_known():
    assert replace_storage(BIGGER, observed(*on([StorageSpec("20Gi")] * 3))) is None
    assert replace_storage(BIGGER, observed(*cluster(3))) is None  # local: no volumes


def test_followers_go_first_newest_first_one_at_a_time():
    step = plan(BIGGER, observed(*on([OLD] * 3, leader=0)))
    assert isinstance(step, RemoveMember) and (step.name, step.member_id) == ("demo-2", 1002)
    assert "10Gi of class standard" in step.reason and "20Gi" in step.reason


def test_the_removed_member_is_replaced_by_a_learner_before_the_next_one_goes():
    runtime, members, health = on([OLD] * 3)
    del runtime[2], members[2], health["demo-2"]
    assert plan(BIGGER, observed(runtime, members, health)) == AddLearner("demo-2")
    runtime.append(attrs.evolve(rt(2), volume=StorageSpec("20Gi", "standard")))  # its new claim
    members.append(em(2, learner=True))
    health["demo-2"] = hl(2, learner=True)
    assert plan(BIGGER, observed(runtime, members, health)) == PromoteLearner("demo-2", 1002)
    members[2], health["demo-2"] = em(2), hl(2)
    step = plan(BIGGER, observed(runtime, members, health))
    assert isinstance(step, RemoveMember) and step.name == "demo-1"


def test_the_leader_goes_last_after_leadership_moved_to_a_member_on_the_new_storage():
    new = StorageSpec("10Gi", "fast")
    step = plan(FAST, observed(*on([OLD, new, new], leader=0)))
    assert isinstance(step, MoveLeader) and step.to_name in ("demo-1", "demo-2")
    step = plan(FAST, observed(*on([OLD, new, new], leader=1)))
    assert isinstance(step, RemoveMember) and step.name == "demo-0"


def test_nothing_goes_while_a_member_is_unhealthy_or_lagging():
    runtime, members, health = on([OLD] * 3)
    runtime[1] = attrs.evolve(rt(1, EXITED), volume=OLD)
    step = replace_storage(
        BIGGER, observed(runtime, members, {k: v for k, v in health.items() if k != "demo-1"})
    )
    assert isinstance(step, Wait) and "not healthy" in step.reason
    runtime, members, health = on([OLD] * 3)
    health["demo-2"] = hl(2, index=5000, applied=100)
    step = replace_storage(BIGGER, observed(runtime, members, health))
    assert isinstance(step, Wait) and "catch up" in step.reason


def test_a_one_member_cluster_is_not_moved():
    one = attrs.evolve(BIGGER, size=1)
    step = replace_storage(one, observed(*on([OLD], n=1)))
    assert isinstance(step, Wait) and "one-member" in step.reason

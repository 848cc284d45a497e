"""Adoption (spec.adopt), decided from hand-built observations: the old cluster's members count
for quorum and leadership but not for the size; the new members join as learners; with removeOld
the old members then leave one at a time, leadership moved off first; what cannot be adopted is
refused by name (a cluster with etcd auth on, or not known to have it off, among them); and no
cluster of our own is ever seeded in place of the one to adopt."""

import attrs

from actors.actions import AddLearner, MoveLeader, PromoteLearner, RemoveMember, StartSeed, Wait
from actors.assess import assess
from actors.model import AdoptSpec, AuthAnswer, ClusterSpec, EtcdMember, MemberHealth, OldAuth, Phase
from actors.plan import plan
from tests.unit.facts import cluster, em, hl, observed, rt

OFF = OldAuth(AuthAnswer.OFF)
OLD_URLS = ("http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379")
KEEP_OLD = ClusterSpec(size=3, tls_enabled=False, adopt=AdoptSpec(endpoints=OLD_URLS))
REMOVE_OLD = attrs.evolve(KEEP_OLD, adopt=AdoptSpec(endpoints=OLD_URLS, remove_old=True))


def old(i: int) -> EtcdMember:
    return EtcdMember(2000 + i, f"old-{i}", (f"http://10.0.0.{i + 1}:2380",), (OLD_URLS[i],), False)


def old_health(i: int, leader: int = 2000, version: str = "3.6.15") -> MemberHealth:
    return MemberHealth(2000 + i, leader, 500, 500, False, 4096, version=version)


def adopting(own: int, *, old_leader: bool = True, answering: int = 3, version: str = "3.6.15"):
    """`own` new voters beside three old members; the leader old-0 or demo-0."""
    runtime, members, health = cluster(own)
    leader = 2000 if old_leader or not own else 1000
    health = {name: attrs.evolve(h, leader_id=leader) for name, h in health.items()}
    foreign = {2000 + i: old_health(i, leader, version) if i < answering else None for i in range(3)}
    view = observed(runtime, [*members, *(old(i) for i in range(3))], health)
    return attrs.evolve(view, foreign=foreign, adopt_auth=OFF)


def test_a_cluster_to_adopt_that_does_not_answer_is_waited_for_never_seeded():
    step = plan(KEEP_OLD, observed([], None, {}))
    assert isinstance(step, Wait) and "http://10.0.0.1:2379" in step.reason
    assert isinstance(plan(ClusterSpec(size=3), observed([], None, {})), StartSeed)  # without adopt


def test_the_old_members_are_not_taken_for_lost_data_and_new_members_join_as_learners():
    assert plan(KEEP_OLD, adopting(0)) == AddLearner("demo-0")
    assert plan(KEEP_OLD, adopting(2)) == AddLearner("demo-2")


def test_without_adopt_a_started_member_nobody_runs_is_lost_data():
    view = attrs.evolve(adopting(3), foreign={})
    step = plan(ClusterSpec(size=3, tls_enabled=False), view)
    assert isinstance(step, Wait) and "old-0: its data is gone" in step.reason


def test_a_learner_is_promoted_once_it_caught_up_with_an_old_leader():
    view = adopting(2)
    members = (*view.members, em(2, learner=True))
    health = {**view.health, "demo-2": hl(2, leader=1000, index=480, learner=True)}
    view = attrs.evolve(view, runtime=(*view.runtime, rt(2)), etcd_members=members, health=health)
    assert plan(KEEP_OLD, view) == PromoteLearner("demo-2", 1002)


def test_without_remove_old_the_adopted_cluster_is_converged_with_its_old_members_kept():
    assert plan(KEEP_OLD, adopting(3)) is None


def test_with_remove_old_leadership_moves_to_a_new_member_before_an_old_leader_leaves():
    step = plan(REMOVE_OLD, adopting(3, old_leader=True))
    assert isinstance(step, MoveLeader) and step.to_id in (1000, 1001, 1002)


def test_with_remove_old_an_unreachable_old_member_leaves_first():
    step = plan(REMOVE_OLD, adopting(3, old_leader=False, answering=2))
    assert step == RemoveMember(2002, "old-2", reason=step.reason) and "adopted" in step.reason


def test_old_members_are_not_removed_before_the_new_ones_vote():
    assert plan(REMOVE_OLD, adopting(2, old_leader=False)) == AddLearner("demo-2")


def test_an_old_cluster_without_quorum_is_held_not_joined():
    step = plan(KEEP_OLD, adopting(0, answering=1))
    assert isinstance(step, Wait) and "quorum" in step.reason


def test_too_many_members_and_an_unsupported_version_are_refused_by_name():
    big = attrs.evolve(KEEP_OLD, size=7)
    step = plan(big, adopting(0))
    assert isinstance(step, Wait) and "spec.adopt" in step.reason and "at most 9" in step.reason
    step = plan(KEEP_OLD, adopting(0, version="3.4.37"))
    assert (
        isinstance(step, Wait) and "3.4.37" in step.reason and "same minor or the one before" in step.reason
    )
    assert plan(KEEP_OLD, adopting(0, version="3.5.21")) == AddLearner("demo-0")


def test_old_members_whose_peers_speak_another_scheme_are_refused_by_name():
    tls = attrs.evolve(KEEP_OLD, tls_enabled=True)  # the old members' peer URLs are http
    step = plan(tls, adopting(0))
    assert (
        isinstance(step, Wait) and "http://10.0.0.1:2380" in step.reason and "do not use https" in step.reason
    )


def test_no_old_member_leaves_on_answers_asked_before_the_last_step():
    view = attrs.evolve(adopting(3, old_leader=True), answered_before_step=frozenset({"demo-1"}))
    step = plan(REMOVE_OLD, view)
    assert isinstance(step, Wait) and "demo-1 answered since the last step" in step.reason


def test_the_phase_counts_our_own_voters_and_the_old_members_leaving_is_scaling():
    def phase(spec, view, step, previous=None):
        return assess(spec, view, previous=previous, generation=1, step=step, now=1.0).phase

    # Three old voters are not the size: adding our first member is scaling, not Running.
    assert phase(KEEP_OLD, adopting(0), AddLearner("demo-0")) is Phase.SCALING
    assert phase(KEEP_OLD, adopting(3), None) is Phase.RUNNING  # without removeOld, done
    old_leaves = RemoveMember(2001, "old-1", reason="adopted")
    assert phase(REMOVE_OLD, adopting(3), old_leaves, Phase.RUNNING) is Phase.SCALING
    # Back from a quorum loss once our own voters are whole, the old ones beside them.
    assert phase(KEEP_OLD, adopting(3), None, Phase.RECOVERING) is Phase.RUNNING


def test_ready_replicas_are_our_own_healthy_voters() -> None:
    during = assess(
        KEEP_OLD, adopting(2), previous=Phase.SCALING, generation=1, step=AddLearner("demo-2"), now=1.0
    )
    assert during.ready_replicas == 2  # beside three old voters, which status.members still shows
    assert len(during.members) == 5


def test_a_cluster_to_adopt_with_auth_on_is_refused_by_name_before_any_member_joins():
    for said in (OldAuth(AuthAnswer.ON), OldAuth(AuthAnswer.REFUSED, "etcdserver: user name not found")):
        step = plan(REMOVE_OLD, attrs.evolve(adopting(0), adopt_auth=said))
        assert isinstance(step, Wait), step
        assert step.reason.startswith("spec.adopt: the cluster to adopt")
        assert "adopted only with auth off" in step.reason and "spec.security.auth" in step.reason
    assert "refuses AuthStatus (etcdserver: user name not found): its auth is on" in step.reason


def test_a_refused_member_list_with_auth_on_is_named_for_auth_not_for_silence():
    """Over plain HTTP etcd with auth on refuses the member list too ("user name is empty")."""
    silent = attrs.evolve(observed([], None, {}), membership_error="etcdserver: user name is empty")
    refused = attrs.evolve(silent, adopt_auth=OldAuth(AuthAnswer.REFUSED, "etcdserver: user name is empty"))
    step = plan(KEEP_OLD, refused)
    assert isinstance(step, Wait) and "its auth is on" in step.reason and "answers at" not in step.reason
    # Nothing answers at all: that is what the status says.
    unanswered = attrs.evolve(silent, adopt_auth=OldAuth(AuthAnswer.UNANSWERED, "connection refused"))
    step = plan(KEEP_OLD, unanswered)
    assert isinstance(step, Wait) and "no member of the cluster to adopt answers" in step.reason


def test_auth_not_known_to_be_off_is_waited_for_never_taken_for_off():
    for unknown in (None, OldAuth(AuthAnswer.UNANSWERED, "no answer in 3s")):
        step = plan(KEEP_OLD, attrs.evolve(adopting(0), adopt_auth=unknown))
        assert isinstance(step, Wait) and "not yet known whether" in step.reason, step
    assert plan(KEEP_OLD, adopting(0)) == AddLearner("demo-0")  # off: the first member joins


def test_once_a_member_of_ours_runs_auth_is_not_asked_about_again():
    """The first member joined with auth off; auth later is the auth child's (spec.security.auth)."""
    view = attrs.evolve(adopting(2), adopt_auth=None)
    assert plan(KEEP_OLD, view) == AddLearner("demo-2")

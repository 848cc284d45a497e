"""Whose turn it is when members are taken one at a time (rolling restarts, storage changes):
followers first, the highest ordinal first, the leader last with a member already done to take
over; nothing without a leader, nothing for members etcd does not list."""

import attrs

from actors.actions import Wait
from actors.plan.turns import Turn, next_turn
from tests.unit.facts import cluster, em, observed


def test_followers_first_highest_ordinal_first_then_the_leader_with_a_successor_already_done():
    seen = observed(*cluster(3, leader=1))
    assert next_turn(seen, {"demo-0", "demo-1", "demo-2"}, "x") == Turn(em(2), leads=False)
    assert next_turn(seen, {"demo-0", "demo-1"}, "x") == Turn(em(0), leads=False)
    assert next_turn(seen, {"demo-1"}, "x") == Turn(em(1), leads=True, successor=em(0))


def test_the_successor_is_healthy_and_done_and_may_be_missing():
    runtime, members, health = cluster(3, leader=0)
    health["demo-1"] = None  # done, but not answering: no successor
    assert next_turn(observed(runtime, members, health), {"demo-0"}, "x") == Turn(
        em(0), leads=True, successor=em(2)
    )
    assert next_turn(observed(*cluster(1)), {"demo-0"}, "x") == Turn(em(0), leads=True, successor=None)


def test_no_leader_waits_and_members_etcd_does_not_list_are_nobody_s_turn():
    runtime, members, health = cluster(3)
    health = {n: attrs.evolve(h, leader_id=0) for n, h in health.items()}
    step = next_turn(observed(runtime, members, health), {"demo-2"}, "storage change")
    assert step == Wait("storage change waits for the members to agree on a leader")
    assert next_turn(observed(*cluster(3)), {"demo-7"}, "x") is None

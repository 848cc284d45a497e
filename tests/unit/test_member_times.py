"""MemberTimes: silence and stops measured per member, with the clock passed in."""

import attrs

from actors.member_times import MemberTimes
from tests.unit.facts import ABSENT, EXITED, RUNNING, STARTING, rt


def test_silence_counts_from_the_last_answer_or_the_last_start():
    times = MemberTimes()
    times.seen([rt(0), rt(1)], now=100.0)
    times.answered("demo-0", 103.0)
    assert times.silent_for(110.0) == {"demo-0": 7.0, "demo-1": 10.0}
    # A restart (a new pid) starts the count again.
    times.seen([rt(0), attrs.evolve(rt(1), pid=999)], now=111.0)
    assert times.silent_for(112.0)["demo-1"] == 1.0
    # Unreachable counts on from the last answer whatever the process did (quorum-loss bound).
    assert times.unreachable_for(112.0) == {"demo-0": 9.0, "demo-1": 12.0}


def test_a_restart_for_silence_is_remembered_until_the_member_answers():
    times = MemberTimes()
    times.seen([rt(1)], now=0.0)
    times.restarted_for_silence("demo-1")
    times.seen([rt(1)], now=30.0)  # same pid as far as the runtime shows (a pod has none)
    assert times.silent_for(31.0) == {"demo-1": 1.0}
    assert times.restarted_silent() == {"demo-1"}
    times.answered("demo-1", 32.0)
    assert times.restarted_silent() == frozenset()


def test_stops_are_timed_from_when_first_seen_and_gone_members_are_forgotten():
    times = MemberTimes()
    times.seen([rt(0, EXITED)], now=5.0)
    times.seen([rt(0, EXITED)], now=9.0)
    assert times.stopped_for(10.0) == {"demo-0": 5.0}
    times.seen([rt(0, RUNNING)], now=11.0)
    assert times.stopped_for(12.0) == {} and times.silent_for(12.0) == {"demo-0": 1.0}
    times.seen([], now=13.0)
    assert times.silent_for(14.0) == {}


def test_starting_turning_running_is_the_same_process_not_a_restart():
    times = MemberTimes()
    times.seen([rt(0, STARTING)], now=1.0)
    times.seen([rt(0, RUNNING)], now=2.0)
    assert times.started_at("demo-0") == 1.0
    times.seen([rt(0, EXITED)], now=3.0)
    times.seen([rt(0, STARTING)], now=4.0)
    assert times.started_at("demo-0") == 4.0


def test_a_member_new_since_the_last_listing_has_its_answers_counted_from_that_listing():
    # Its first answer may come in before the listing that first shows it (a learner in a pod
    # made ahead answers at once); it started after the listing before, so that answer is its own.
    times = MemberTimes()
    times.seen([rt(0)], now=10.0)
    assert times.answers_from("demo-0") == 10.0  # the first listing of all: nothing before it
    times.seen([rt(0), rt(1, STARTING)], now=12.0)
    assert times.answers_from("demo-1") == 10.0
    assert times.started_at("demo-1") == 12.0  # silence still counts from when it was seen
    # Listed before with a volume but no process (a learner just added): the same.
    times.seen([rt(0), rt(1, STARTING), rt(2, ABSENT)], now=14.0)
    assert times.answers_from("demo-2") is None
    times.seen([rt(0), rt(1, STARTING), rt(2, STARTING)], now=16.0)
    assert times.answers_from("demo-2") == 14.0


def test_a_restarted_member_counts_answers_only_from_the_listing_that_shows_it_again():
    times = MemberTimes()
    times.seen([rt(0), rt(1)], now=10.0)
    times.seen([rt(0), rt(1, EXITED)], now=12.0)
    assert times.answers_from("demo-1") is None  # stopped: no answer is its current process
    times.seen([rt(0), rt(1, STARTING)], now=14.0)  # its old process may have answered until now
    assert times.answers_from("demo-1") == 14.0
    times.seen([rt(0), attrs.evolve(rt(1), pid=999)], now=16.0)  # a new pid: the same rule
    assert times.answers_from("demo-1") == 16.0
    times.seen([rt(0)], now=18.0)  # gone, then back (new pod and volume): since the listing before
    times.seen([rt(0), rt(1, STARTING)], now=20.0)
    assert times.answers_from("demo-1") == 18.0


def test_unplaced_counts_from_the_first_listing_without_a_node_and_ends_when_placed():
    times = MemberTimes()
    pending = attrs.evolve(rt(0, STARTING), unschedulable="0/3 nodes are available")
    times.seen([pending, rt(1)], now=10.0)
    times.seen([pending, rt(1)], now=25.0)
    assert times.unplaced_for(40.0) == {"demo-0": 30.0}
    times.seen([rt(0, STARTING), rt(1)], now=41.0)  # scheduled at last
    assert times.unplaced_for(50.0) == {}

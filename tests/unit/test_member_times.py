"""MemberTimes: silence and stops measured per member, with the clock passed in."""

import attrs

from actors.member_times import MemberTimes
from tests.unit.facts import EXITED, RUNNING, STARTING, rt


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

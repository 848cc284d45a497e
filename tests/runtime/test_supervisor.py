"""Supervisor semantics, with exact simulated times.

Backoff delays are dyadic (0.25, 0.5, ...) and jitter is 0 unless a test is about jitter, so
every expected time is exactly representable and compared with ==.
"""

from __future__ import annotations

import logging
import random

import pytest
import trio
import trio.testing

from supervisor.runtime import (
    Backoff,
    ChildSpec,
    ChildStatistics,
    Intensity,
    Restart,
    Strategy,
    Supervisor,
    SupervisorEscalation,
)

from .helpers import Boom, Probe, count_tasks

BACKOFF = Backoff(initial=0.25, maximum=4.0, jitter=0.0)


def make(probe: Probe, ids: str, **kw: object) -> Supervisor:
    kw.setdefault("backoff", BACKOFF)
    return Supervisor("sup", [probe.spec(i) for i in ids], **kw)  # type: ignore[arg-type]


async def test_starts_children_in_order_each_after_readiness(autojump_clock: trio.testing.MockClock) -> None:
    order: list[str] = []

    def slow(id: str, delay: float) -> ChildSpec:
        async def start(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            order.append(f"{id} begins at {trio.current_time()}")
            await trio.sleep(delay)
            task_status.started()
            await trio.sleep_forever()

        return ChildSpec(id, start)

    sup = Supervisor("sup", [slow("a", 1), slow("b", 2), slow("c", 0)])
    async with trio.open_nursery() as nursery:
        assert await nursery.start(sup.run) is sup
        assert trio.current_time() == 3.0
        nursery.cancel_scope.cancel()
    assert order == ["a begins at 0.0", "b begins at 1.0", "c begins at 3.0"]


@pytest.mark.parametrize(
    ("strategy", "stopped", "restarted"),
    [
        (Strategy.ONE_FOR_ONE, [], ["b"]),
        (Strategy.ONE_FOR_ALL, ["c", "a"], ["a", "b", "c"]),
        (Strategy.REST_FOR_ONE, ["c"], ["b", "c"]),
    ],
)
async def test_strategies(
    autojump_clock: trio.testing.MockClock, strategy: Strategy, stopped: list[str], restarted: list[str]
) -> None:
    probe = Probe()
    sup = make(probe, "abc", strategy=strategy)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        await trio.sleep(1)
        probe.crash("b")
        await trio.sleep(1)
        # Affected siblings stop at the crash (reverse start order), all restart after the backoff.
        assert probe.of("stop") == [(1.0, i) for i in stopped]
        assert probe.of("start")[3:] == [(1.25, i) for i in restarted]
        stats = sup.statistics()
        assert stats.restarts_total == 1
        assert {c.id: c.restarts for c in stats.children} == {i: int(i in restarted) for i in "abc"}
        assert all(c.running for c in stats.children)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("restart", "how", "restarted"),
    [
        (Restart.PERMANENT, "crash", True),
        (Restart.PERMANENT, "exit", True),
        (Restart.TRANSIENT, "crash", True),
        (Restart.TRANSIENT, "exit", False),
        (Restart.TEMPORARY, "crash", False),
        (Restart.TEMPORARY, "exit", False),
    ],
)
async def test_restart_types(
    autojump_clock: trio.testing.MockClock, restart: Restart, how: str, restarted: bool
) -> None:
    probe = Probe()
    sup = Supervisor("sup", [probe.spec("a"), probe.spec("x", restart=restart)], backoff=BACKOFF)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        await trio.sleep(1)
        getattr(probe, how)("x")
        await trio.sleep(1)
        if restarted:
            assert probe.of("start") == [(0.0, "a"), (0.0, "x"), (1.25, "x")]
            assert sup.child_ids() == ("a", "x")
            assert sup.statistics().restarts_total == 1
        else:
            assert probe.of("start") == [(0.0, "a"), (0.0, "x")]
            assert sup.child_ids() == ("a",)
            assert sup.statistics().restarts_total == 0
        nursery.cancel_scope.cancel()


async def test_temporary_sibling_is_not_brought_back_by_a_group_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    sup = Supervisor(
        "sup",
        [
            probe.spec("a"),
            probe.spec("t", restart=Restart.TEMPORARY),
            probe.spec("c", restart=Restart.TRANSIENT),
        ],
        strategy=Strategy.ONE_FOR_ALL,
        backoff=BACKOFF,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        probe.crash("a")
        await trio.sleep(1)
        assert sup.child_ids() == ("a", "c")
        assert probe.of("start")[3:] == [(0.25, "a"), (0.25, "c")]
        nursery.cancel_scope.cancel()


async def test_backoff_grows_then_resets_after_a_long_uptime(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    sup = make(probe, "x", intensity=Intensity(max_restarts=100, within=1))
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        for _ in range(6):
            probe.crash("x")
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(5)  # 0.25, 0.5, 1, 2, 4, 4 (capped), each uptime below 2 * maximum
        t = trio.current_time()
        await trio.sleep(10)  # up for more than 8s: the next crash starts over at 0.25
        probe.crash("x")
        await trio.sleep(1)
        starts = [s for s, _ in probe.of("start")]
        crashes = [c for c, _ in probe.of("crash")]
        assert [s - c for s, c in zip(starts[1:], crashes, strict=True)] == [0.25, 0.5, 1, 2, 4, 4, 0.25]
        assert crashes[-1] == t + 10
        nursery.cancel_scope.cancel()


async def test_jitter_comes_from_the_seeded_rng(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    backoff = Backoff(initial=1.0, maximum=10.0, multiplier=3.0, jitter=0.5)
    sup = Supervisor("sup", [probe.spec("x")], backoff=backoff, rng=random.Random(42))
    twin = random.Random(42)
    expected = [1.0 * (1 + 0.5 * (2 * twin.random() - 1)), 3.0 * (1 + 0.5 * (2 * twin.random() - 1))]
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        probe.crash("x")
        await trio.sleep(2)
        probe.crash("x")
        await trio.sleep(10)
        starts = [s for s, _ in probe.of("start")]
        crashes = [c for c, _ in probe.of("crash")]
        # approx only for float round-off in the clock's jump arithmetic (abs 1e-9).
        assert [s - c for s, c in zip(starts[1:], crashes, strict=True)] == pytest.approx(expected, abs=1e-9)
        assert expected[0] != 1.0 and expected[1] != 3.0  # the jitter did something
        nursery.cancel_scope.cancel()


def test_backoff_schedule() -> None:
    b = Backoff(initial=0.05, maximum=1.0, multiplier=2.0, jitter=0.0)
    assert [b.base_delay(n) for n in range(7)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert b.reset_threshold == 2.0
    assert Backoff(reset_after=7).reset_threshold == 7
    draw = random.Random(1).random()
    assert Backoff(initial=1, jitter=0.1).delay(0, random.Random(1)) == 1 + 0.1 * (2 * draw - 1)
    assert Backoff(maximum=5).base_delay(10_000) == 5


async def test_intensity_escalates_up_two_levels(autojump_clock: trio.testing.MockClock) -> None:
    starts: list[float] = []

    async def crash_loop(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        starts.append(trio.current_time())
        task_status.started()
        raise Boom("leaf")

    mid = Supervisor("mid", [ChildSpec("leaf", crash_loop)], intensity=Intensity(2, 10), backoff=BACKOFF)
    top = Supervisor("top", [ChildSpec("mid", mid.run)], intensity=Intensity(1, 10), backoff=BACKOFF)
    before = count_tasks()
    with pytest.raises(SupervisorEscalation) as info:
        await top.run()
    # leaf: 0, +0.25, +0.5 -> mid gives up at 0.75; top restarts mid at 1.0; again -> top gives up.
    assert starts == [0.0, 0.25, 0.75, 1.0, 1.25, 1.75]
    assert trio.current_time() == 1.75
    top_esc = info.value
    assert (top_esc.supervisor, top_esc.child) == ("top", "mid")
    mid_esc = top_esc.last_failure
    assert isinstance(mid_esc, SupervisorEscalation)
    assert (mid_esc.supervisor, mid_esc.child) == ("mid", "leaf")
    assert repr(mid_esc.last_failure) == "Boom('leaf')"
    assert count_tasks() == before


async def test_restarts_outside_the_window_do_not_escalate(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    constant = Backoff(0.25, 0.25, jitter=0)
    sup = make(probe, "x", intensity=Intensity(max_restarts=2, within=3), backoff=constant)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        for _ in range(10):
            probe.crash("x")
            await trio.sleep(1.6)  # at most two restarts fall inside any 3s window
        assert sup.statistics().restarts_total == 10
        nursery.cancel_scope.cancel()


async def test_escalation_stops_everything(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    sup = make(probe, "abc", intensity=Intensity(max_restarts=0, within=5))
    before = count_tasks()

    async def crash_later() -> None:
        await trio.sleep(1)
        probe.crash("b")

    with pytest.RaisesGroup(SupervisorEscalation) as info:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(crash_later)
            await sup.run()
    escalation = info.value.exceptions[0]
    assert isinstance(escalation, SupervisorEscalation)
    assert escalation.child == "b"
    assert probe.of("stop") == [(1.0, "c"), (1.0, "a")]
    assert count_tasks() == before


async def test_stop_is_reverse_order_with_a_grace_each(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    probe.cleanup = {"a": 1, "b": 2, "c": 3}
    sup = make(probe, "abc")
    before = count_tasks()
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert probe.of("stop") == [(10.0, "c"), (13.0, "b"), (15.0, "a")]
    assert probe.of("cleaned") == [(13.0, "c"), (15.0, "b"), (16.0, "a")]
    assert trio.current_time() == 16.0
    assert count_tasks() == before


async def test_child_ignoring_stop_is_cancelled_after_exactly_its_shutdown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    probe.cleanup = {"stubborn": float("inf")}
    sup = Supervisor("sup", [probe.spec("a"), probe.spec("stubborn", shutdown=2.5)])
    before = count_tasks()
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert probe.of("stop") == [(1.0, "stubborn"), (3.5, "a")]
    assert probe.of("cleaned") == [(3.5, "stubborn"), (3.5, "a")]
    assert count_tasks() == before


async def test_hard_cancel_reaches_grandchildren(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    probe.cleanup = {"leaf": float("inf")}
    mid = Supervisor("mid", [probe.spec("leaf", shutdown=100)])
    top = Supervisor("top", [ChildSpec("mid", mid.run, shutdown=3)])
    before = count_tasks()
    async with trio.open_nursery() as nursery:
        await nursery.start(top.run)
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    # mid's own 3s grace runs out before leaf's 100s: mid is cancelled hard, and so is leaf.
    assert probe.of("cleaned") == [(4.0, "leaf")]
    assert trio.current_time() == 4.0
    assert count_tasks() == before


async def test_no_task_survives_the_supervisor(autojump_clock: trio.testing.MockClock) -> None:
    async def busy(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as inner:
            for _ in range(5):
                inner.start_soon(trio.sleep_forever)
            task_status.started()
            await trio.sleep_forever()

    inner_sup = Supervisor("inner", [ChildSpec(f"b{i}", busy) for i in range(3)])
    sup = Supervisor("outer", [ChildSpec("inner", inner_sup.run), ChildSpec("busy", busy)])
    before = count_tasks()
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        # outer run + 2 children wrappers (inner run, busy) + 3 inner wrappers, each busy with 5 sleepers
        assert count_tasks() == before + 1 + 2 + 3 + 4 * 5
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert count_tasks() == before


async def test_dynamic_add_and_remove(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    probe.cleanup = {"d1": 0.5}
    sup = make(probe, "a")
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        before = count_tasks()
        await sup.add_child(probe.spec("d1"))
        await sup.add_child(probe.spec("d2"))
        assert sup.child_ids() == ("a", "d1", "d2")
        assert count_tasks() == before + 2
        with pytest.raises(ValueError):
            await sup.add_child(probe.spec("d1"))
        await trio.sleep(1)
        await sup.remove_child("d1")
        assert trio.current_time() == 1.5  # waited for d1's cleanup
        assert sup.child_ids() == ("a", "d2")
        assert count_tasks() == before + 1
        with pytest.raises(KeyError):
            await sup.remove_child("d1")
        await trio.sleep(10)
        assert probe.of("start") == [(0.0, "a"), (0.0, "d1"), (0.0, "d2")]  # removal is not a crash
        probe.fail_start["bad"] = 1
        with pytest.raises(Boom):
            await sup.add_child(probe.spec("bad"))
        assert sup.child_ids() == ("a", "d2")
        probe.crash("d2")  # a dynamic child is supervised like any other
        await trio.sleep(1)
        assert sup.statistics().children[1] == ChildStatistics("d2", True, 1, "Boom('d2')")
        nursery.cancel_scope.cancel()


async def test_statistics_while_running(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    sup = make(probe, "ab", strategy=Strategy.ONE_FOR_ONE)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        probe.crash("b")
        await trio.testing.wait_all_tasks_blocked()
        stats = sup.statistics()
        assert stats.name == "sup" and stats.strategy is Strategy.ONE_FOR_ONE
        assert stats.children == (
            ChildStatistics("a", True, 0, None),
            ChildStatistics("b", False, 0, "Boom('b')"),
        )
        await trio.sleep(0.25)
        await trio.testing.wait_all_tasks_blocked()  # the restart is due at this very instant
        assert trio.current_time() == 0.25
        assert sup.statistics().children[1] == ChildStatistics("b", True, 1, "Boom('b')")
        assert sup.statistics().restarts_total == 1
        nursery.cancel_scope.cancel()


async def test_failed_restart_counts_as_a_crash(autojump_clock: trio.testing.MockClock) -> None:
    probe = Probe()
    sup = make(probe, "x")
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        probe.fail_start["x"] = 2
        probe.crash("x")
        await trio.sleep(5)
        assert [t for t, _ in probe.of("start")] == [0.0, 0.25, 0.75, 1.75]
        assert sup.statistics().children[0] == ChildStatistics("x", True, 3, "Boom('x failed to start')")
        nursery.cancel_scope.cancel()


async def test_initial_start_failure_stops_started_children_and_raises(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    probe.fail_start["b"] = 1
    sup = make(probe, "abc")
    with pytest.RaisesGroup(Boom):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
    assert probe.of("start") == [(0.0, "a"), (0.0, "b")]
    assert probe.of("stop") == [(0.0, "a")]


async def test_supervisor_can_run_again_from_its_static_children(
    autojump_clock: trio.testing.MockClock,
) -> None:
    probe = Probe()
    sup = make(probe, "a")
    for _ in range(2):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            await sup.add_child(probe.spec("dyn"))
            nursery.cancel_scope.cancel()
        assert sup.child_ids() == ("a", "dyn")
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        assert sup.child_ids() == ("a",)
        with pytest.raises(RuntimeError):
            await sup.run()
        nursery.cancel_scope.cancel()


def test_duplicate_ids_are_refused() -> None:
    probe = Probe()
    with pytest.raises(ValueError):
        Supervisor("s", [probe.spec("a"), probe.spec("a")])


async def test_logs_structured_events(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="supervisor.runtime")
    probe = Probe()
    sup = make(probe, "x", intensity=Intensity(max_restarts=1, within=10))
    with pytest.RaisesGroup(SupervisorEscalation):
        async with trio.open_nursery() as nursery:
            await nursery.start(sup.run)
            probe.crash("x")
            await trio.sleep(1)
            probe.crash("x")
            await trio.sleep_forever()
    events = [
        (r.event, r.child, r.restarts, r.error)  # type: ignore[attr-defined]
        for r in caplog.records
        if hasattr(r, "event")
    ]
    assert events == [
        ("start", "x", 0, None),
        ("crash", "x", 0, "Boom('x')"),
        ("restart", "x", 1, "Boom('x')"),
        ("start", "x", 1, None),
        ("crash", "x", 1, "Boom('x')"),
        ("escalate", "x", 1, "Boom('x')"),
    ]
    assert all(r.supervisor == "sup" for r in caplog.records if hasattr(r, "event"))  # type: ignore[attr-defined]

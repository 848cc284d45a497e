"""Handles, calls and actors running under a supervisor."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing

from supervisor.runtime import (
    ActorStopped,
    Backoff,
    CallSuperseded,
    CallTimeout,
    Handle,
    Mailbox,
    Reply,
    Supervisor,
    actor_child,
)

from .helpers import Add, Ask, Counter, Crash, Get, Hang, Msg

BACKOFF = Backoff(initial=0.25, maximum=4.0, jitter=0.0)


async def start_counter(nursery: trio.Nursery, **kw: object) -> tuple[Supervisor, Handle[Msg]]:
    spec, handle = actor_child("counter", Counter, **kw)  # type: ignore[arg-type]
    sup = Supervisor("sup", [spec], backoff=BACKOFF)
    await nursery.start(sup.run)
    return sup, handle


async def test_call_returns_the_actors_answer(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        _, handle = await start_counter(nursery)
        await handle.send(Add(2))
        handle.send_nowait(Add(3))
        assert await handle.call(Get, timeout=1) == 5
        nursery.cancel_scope.cancel()


async def test_reply_fail_raises_in_the_caller(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        _, handle = await start_counter(nursery)
        with pytest.raises(KeyError):
            await handle.call(lambda r: Ask(r, fail=True), timeout=1)
        assert await handle.call(Get, timeout=1) == 0  # the actor did not crash
        nursery.cancel_scope.cancel()


async def test_call_times_out_after_exactly_the_timeout(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        _, handle = await start_counter(nursery)
        start = trio.current_time()
        with pytest.raises(CallTimeout):
            await handle.call(lambda r: Ask(r, seconds=10), timeout=2.5)
        assert trio.current_time() == start + 2.5
        # The late answer is ignored; the actor keeps serving.
        assert await handle.call(Get, timeout=20) == 0
        assert trio.current_time() == start + 10
        nursery.cancel_scope.cancel()


async def test_timeout_covers_waiting_for_mailbox_room(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        _, handle = await start_counter(nursery, mailbox_capacity=1)
        await handle.send(Hang(100))
        await trio.lowlevel.checkpoint()  # the actor takes Hang out and is busy with it
        handle.send_nowait(Add(1))  # fills the mailbox
        with pytest.raises(trio.WouldBlock):
            handle.send_nowait(Add(1))
        with pytest.raises(CallTimeout):
            await handle.call(Get, timeout=3)
        assert trio.current_time() == 3.0
        nursery.cancel_scope.cancel()


async def test_crash_while_answering_gives_actor_stopped_not_a_hang(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        sup, handle = await start_counter(nursery)
        with pytest.raises(ActorStopped):
            await handle.call(lambda r: Ask(r, seconds=1, crash=True), timeout=100)
        assert trio.current_time() == 1.0  # told at the crash, not at the timeout
        assert sup.statistics().children[0].last_failure == "Boom('crash while answering')"
        nursery.cancel_scope.cancel()


async def test_call_queued_behind_a_crash_is_answered_by_the_next_incarnation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        sup, handle = await start_counter(nursery)
        await handle.send(Add(5))
        await handle.send(Crash())
        # Queued before the crash; the fresh Counter (total 0) answers after the 0.25s backoff.
        assert await handle.call(Get, timeout=10) == 0
        assert trio.current_time() == 0.25
        assert sup.statistics().children[0].restarts == 1
        nursery.cancel_scope.cancel()


async def test_handle_stays_valid_and_pending_messages_survive_restarts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        sup, handle = await start_counter(nursery)
        for round in range(3):
            handle.send_nowait(Add(100))
            handle.send_nowait(Crash())
            handle.send_nowait(Add(1))  # pending during the crash: handled by the next actor
            handle.send_nowait(Add(2))
            assert await handle.call(Get, timeout=10) == 3
            assert sup.statistics().children[0].restarts == round + 1
        nursery.cancel_scope.cancel()


async def test_stopping_the_actor_fails_in_flight_and_queued_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    outcomes: list[tuple[str, float]] = []

    async def caller(name: str, make: object) -> None:
        try:
            await handle.call(make, timeout=100)  # type: ignore[arg-type]
        except ActorStopped:
            outcomes.append((name, trio.current_time()))

    async with trio.open_nursery() as nursery:
        sup, handle = await start_counter(nursery)
        nursery.start_soon(caller, "in-flight", lambda r: Ask(r, seconds=50))
        await trio.sleep(0.5)
        nursery.start_soon(caller, "queued", Get)
        await trio.sleep(0.5)
        await sup.remove_child("counter")
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(outcomes) == [("in-flight", 1.0), ("queued", 1.0)]
        nursery.cancel_scope.cancel()


async def test_a_coalesced_request_is_superseded(autojump_clock: trio.testing.MockClock) -> None:
    @attrs.frozen
    class Probe:
        reply: Reply[int]

    mailbox: Mailbox[Probe] = Mailbox(4, coalesce_key=lambda m: "probe")
    handle = Handle(mailbox, id="x")
    results: list[object] = []

    async def first() -> None:
        try:
            await handle.call(Probe, timeout=5)
        except CallSuperseded as exc:
            results.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(first)
        await trio.sleep(1)
        # Replaces the first, whose caller learns at once; nobody answers this one.
        with pytest.raises(CallTimeout):
            await handle.call(Probe, timeout=0.5)
        assert trio.current_time() == 1.5
    assert len(results) == 1
    assert mailbox.statistics().coalesced == 1


async def test_closed_mailbox_means_actor_stopped() -> None:
    mailbox: Mailbox[Msg] = Mailbox(4)
    handle = Handle(mailbox, id="gone")
    mailbox.close()
    with pytest.raises(ActorStopped):
        await handle.send(Add(1))
    with pytest.raises(ActorStopped):
        handle.send_nowait(Add(1))
    with pytest.raises(ActorStopped):
        await handle.call(Get, timeout=1)


async def test_close_fails_pending_calls(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[Msg] = Mailbox(4)
    handle = Handle(mailbox, id="x")
    failed_at: list[float] = []

    async def caller() -> None:
        with pytest.raises(ActorStopped):
            await handle.call(Get, timeout=10)
        failed_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller)
        await trio.sleep(2)
        mailbox.close()
    assert failed_at == [2.0]


async def test_coalescing_mailbox_through_actor_child(autojump_clock: trio.testing.MockClock) -> None:
    def key(msg: Msg) -> str | None:
        return "add" if isinstance(msg, Add) else None

    async with trio.open_nursery() as nursery:
        _, handle = await start_counter(nursery, coalesce_key=key)
        await handle.send(Hang(1))
        await trio.lowlevel.checkpoint()
        for n in range(1, 11):
            handle.send_nowait(Add(n))  # level-triggered: only the latest survives
        assert await handle.call(Get, timeout=5) == 10
        stats = handle.statistics()
        assert (stats.sent, stats.coalesced, stats.depth) == (12, 9, 0)
        nursery.cancel_scope.cancel()


def test_actor_child_rejects_two_coalescing_sources() -> None:
    with pytest.raises(ValueError):
        actor_child("x", Counter, mailbox=Mailbox(1), coalesce_key=lambda m: None)

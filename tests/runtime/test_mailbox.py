from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from supervisor.runtime import Mailbox, MailboxStatistics


@attrs.frozen
class Obs:
    key: str
    value: int


@attrs.frozen
class Cmd:
    name: str


def key_of(msg: Obs | Cmd) -> str | None:
    return msg.key if isinstance(msg, Obs) else None


def drain(mailbox: Mailbox[Obs | Cmd]) -> list[Obs | Cmd]:
    out = []
    while True:
        try:
            out.append(mailbox.receive_nowait())
        except trio.WouldBlock:
            return out


async def test_send_nowait_raises_wouldblock_when_full() -> None:
    mailbox: Mailbox[int] = Mailbox(2)
    mailbox.send_nowait(1)
    mailbox.send_nowait(2)
    with pytest.raises(trio.WouldBlock):
        mailbox.send_nowait(3)
    assert mailbox.statistics() == MailboxStatistics(depth=2, capacity=2, sent=2, coalesced=0)
    assert await mailbox.receive() == 1
    mailbox.send_nowait(3)
    assert [mailbox.receive_nowait(), mailbox.receive_nowait()] == [2, 3]


async def test_send_waits_for_room_until_a_receive(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[int] = Mailbox(1)
    mailbox.send_nowait(1)
    sent_at: list[float] = []

    async def sender() -> None:
        await mailbox.send(2)
        sent_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        await trio.sleep(3)
        assert sent_at == []
        assert mailbox.statistics().depth == 1
        assert await mailbox.receive() == 1
    assert sent_at == [3.0]
    assert mailbox.receive_nowait() == 2


async def test_receive_waits_for_a_message(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[str] = Mailbox(4)
    got: list[tuple[float, str]] = []

    async def receiver() -> None:
        msg = await mailbox.receive()
        got.append((trio.current_time(), msg))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        await trio.sleep(2)
        await mailbox.send("hi")
    assert got == [(2.0, "hi")]


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Mailbox(0)


async def test_coalescing_keeps_latest_value_at_first_position() -> None:
    mailbox: Mailbox[Obs | Cmd] = Mailbox(10, coalesce_key=key_of)
    mailbox.send_nowait(Obs("a", 1))
    mailbox.send_nowait(Cmd("x"))
    mailbox.send_nowait(Obs("b", 1))
    mailbox.send_nowait(Obs("a", 2))
    await mailbox.send(Obs("a", 3))
    assert mailbox.statistics() == MailboxStatistics(depth=3, capacity=10, sent=5, coalesced=2)
    assert drain(mailbox) == [Obs("a", 3), Cmd("x"), Obs("b", 1)]
    # Once received, the key is no longer pending: a new one queues at the back.
    mailbox.send_nowait(Cmd("y"))
    mailbox.send_nowait(Obs("a", 4))
    assert drain(mailbox) == [Cmd("y"), Obs("a", 4)]


async def test_pending_key_never_blocks_on_a_full_mailbox(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[Obs | Cmd] = Mailbox(2, coalesce_key=key_of)
    mailbox.send_nowait(Obs("a", 1))
    mailbox.send_nowait(Cmd("x"))
    for value in range(2, 100):
        mailbox.send_nowait(Obs("a", value))
    with trio.fail_after(1):  # a blocking send would autojump past the deadline
        await mailbox.send(Obs("a", 100))
    with pytest.raises(trio.WouldBlock):
        mailbox.send_nowait(Obs("b", 1))  # a new key needs room like anything else
    assert drain(mailbox) == [Obs("a", 100), Cmd("x")]


async def test_commands_are_never_coalesced_nor_dropped(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[Obs | Cmd] = Mailbox(2, coalesce_key=key_of)
    received: list[Obs | Cmd] = []

    async def slow_receiver() -> None:
        for _ in range(6):
            await trio.sleep(1)
            received.append(await mailbox.receive())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(slow_receiver)
        for _ in range(6):
            await mailbox.send(Cmd("same"))
        # Six identical commands through a mailbox of two: the sender waited instead of dropping.
        assert trio.current_time() == 4.0
    assert received == [Cmd("same")] * 6
    assert mailbox.statistics().coalesced == 0


async def test_close_drains_then_ends_and_wakes_blocked_senders(
    autojump_clock: trio.testing.MockClock,
) -> None:
    mailbox: Mailbox[int] = Mailbox(1)
    mailbox.send_nowait(1)
    errors: list[BaseException] = []

    async def blocked_sender() -> None:
        try:
            await mailbox.send(2)
        except trio.ClosedResourceError as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(blocked_sender)
        await trio.sleep(1)
        mailbox.close()
    assert len(errors) == 1
    with pytest.raises(trio.ClosedResourceError):
        mailbox.send_nowait(3)
    assert await mailbox.receive() == 1
    with pytest.raises(trio.EndOfChannel):
        await mailbox.receive()


async def test_close_wakes_a_waiting_receiver(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[int] = Mailbox(1)
    ended: list[float] = []

    async def receiver() -> None:
        with pytest.raises(trio.EndOfChannel):
            await mailbox.receive()
        ended.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver)
        await trio.sleep(5)
        mailbox.close()
    assert ended == [5.0]


async def test_fifo_under_many_concurrent_senders(autojump_clock: trio.testing.MockClock) -> None:
    mailbox: Mailbox[tuple[int, int]] = Mailbox(3)
    got: list[tuple[int, int]] = []

    async def sender(who: int) -> None:
        for i in range(20):
            await mailbox.send((who, i))

    async with trio.open_nursery() as nursery:
        for who in range(4):
            nursery.start_soon(sender, who)
        for _ in range(80):
            got.append(await mailbox.receive())
    assert sorted(got) == [(w, i) for w in range(4) for i in range(20)]
    for who in range(4):  # per-sender order is preserved
        assert [i for w, i in got if w == who] == list(range(20))
    assert mailbox.statistics().depth == 0

"""Actor.on_drained: called once per burst of messages, after the mailbox empties."""

import trio

from supervisor.runtime import Actor, Handle, Mailbox, run_actor


class Folding(Actor[int]):
    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self._batch: list[int] = []

    async def handle(self, msg: int) -> None:
        self._batch.append(msg)

    async def on_drained(self) -> None:
        self.batches.append(self._batch)
        self._batch = []


async def test_a_burst_is_acted_on_once_and_each_later_message_on_its_own() -> None:
    handle: Handle[int] = Handle(Mailbox(200), id="folding")
    actor = Folding()
    for i in range(150):  # more than the actor loop's batch between checkpoints
        handle.send_nowait(i)
    async with trio.open_nursery() as nursery:
        await nursery.start(run_actor, actor, handle)
        await trio.testing.wait_all_tasks_blocked()
        assert actor.batches == [list(range(150))]
        handle.send_nowait(150)
        await trio.testing.wait_all_tasks_blocked()
        handle.send_nowait(151)
        await trio.testing.wait_all_tasks_blocked()
        assert actor.batches[1:] == [[150], [151]]
        nursery.cancel_scope.cancel()


async def test_nothing_handled_means_no_drain() -> None:
    handle: Handle[int] = Handle(Mailbox(4), id="idle")
    actor = Folding()
    async with trio.open_nursery() as nursery:
        await nursery.start(run_actor, actor, handle)
        await trio.testing.wait_all_tasks_blocked()
        assert actor.batches == []
        nursery.cancel_scope.cancel()

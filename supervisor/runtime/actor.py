"""The actor base class and the loop that feeds it its mailbox."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import trio

from supervisor.runtime import telemetry
from supervisor.runtime.errors import ActorStopped
from supervisor.runtime.handle import Handle
from supervisor.runtime.mailbox import Mailbox
from supervisor.runtime.reply import Reply
from supervisor.runtime.shutdown import open_cleanup_scope

M = TypeVar("M")

_BATCH = 64


class Actor(Generic[M]):
    """Subclass and implement `handle`. One message at a time, in mailbox order.

    `mailbox` and `handle_ref` are set before `on_start` runs. An exception escaping
    `handle` or `on_start` crashes the actor: it propagates out of its run, and the
    supervisor decides what happens next. State lives in the instance, so a restart
    (a fresh instance from the factory) starts from a clean slate.
    """

    # Subclasses may declare __slots__ too; thousands of idle actors should stay cheap.
    __slots__ = ("handle_ref", "mailbox")

    mailbox: Mailbox[M]
    handle_ref: Handle[M]

    async def on_start(self) -> None:
        """Runs before readiness is reported; restore state from the world here, not from memory."""

    async def on_stop(self) -> None:
        """Runs when the actor is stopped (not when it crashes), within its shutdown grace period."""

    async def handle(self, msg: M) -> None:
        raise NotImplementedError

    async def on_drained(self) -> None:
        """Runs once the mailbox is empty, after one or more messages were handled.

        An actor that folds observations in `handle` acts on them here, once per burst of
        messages instead of once per message.
        """


async def run_actor(
    actor: Actor[M],
    handle: Handle[M],
    *,
    kind: str | None = None,
    task_status: trio.TaskStatus[Handle[M]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run `actor` on the handle's mailbox until cancelled, crashed, or the mailbox closes.

    `kind` names the actor for telemetry (default: the handle's id).
    """
    mailbox = handle._mailbox
    kind = kind or handle.id or "actor"
    with telemetry.running_actor(mailbox, kind):
        await _run(actor, handle, mailbox, kind, task_status)


async def _run(
    actor: Actor[M],
    handle: Handle[M],
    mailbox: Mailbox[M],
    kind: str,
    task_status: trio.TaskStatus[Handle[M]],
) -> None:
    actor.mailbox = mailbox
    actor.handle_ref = handle
    # Replies handed to this incarnation and not yet resolved: they die with it.
    held: list[Reply[Any]] = []
    try:
        await actor.on_start()
        task_status.started(handle)
        unyielded = 0
        undrained = False  # messages handled since the last on_drained
        while True:
            # Drain without a scheduler round-trip per message while messages are waiting
            # (throughput), but yield every _BATCH so a busy actor cannot starve others and
            # still sees cancellation. Yield before dequeuing so a stop never loses a message.
            if unyielded >= _BATCH:
                unyielded = 0
                await trio.lowlevel.checkpoint()
            try:
                msg = mailbox.receive_nowait()
                unyielded += 1
            except trio.WouldBlock:
                unyielded = 0
                if undrained:
                    undrained = False
                    began = trio.current_time()
                    await actor.on_drained()
                    telemetry.observer.drained(kind, trio.current_time() - began)
                    continue  # whatever arrived meanwhile is handled before blocking
                try:
                    msg = await mailbox.receive()
                except trio.EndOfChannel:
                    return
            except trio.EndOfChannel:
                return
            if mailbox._calls:
                reply = mailbox._claim_call(msg)
                if reply is not None:
                    held.append(reply)
            await actor.handle(msg)
            telemetry.observer.handled(kind)
            undrained = True
            if held:
                held = [r for r in held if not r.done]
    except trio.Cancelled:
        # A stop, not a crash: nobody may run this mailbox again, so queued callers are told now
        # instead of waiting out their timeouts.
        mailbox._fail_queued_calls(ActorStopped(f"actor {handle.id!r} stopped"))
        with open_cleanup_scope():
            await actor.on_stop()
        raise
    finally:
        for reply in held:
            reply.fail(ActorStopped(f"actor {handle.id!r} exited before replying"))

"""Child specifications: how a supervisor (re)starts a child."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

import attrs
import trio

from supervisor.runtime.actor import Actor, run_actor
from supervisor.runtime.handle import Handle
from supervisor.runtime.mailbox import Mailbox
from supervisor.runtime.policy import Restart

M = TypeVar("M")


@attrs.frozen
class ChildSpec:
    """`start` is awaited like `nursery.start(start)`: it receives `task_status=` and reports
    readiness with `task_status.started()`; the supervisor starts the next child only then."""

    id: str
    start: Callable[[trio.TaskStatus[Any]], Awaitable[None]]
    restart: Restart = Restart.PERMANENT
    shutdown: float = attrs.field(default=5.0, validator=attrs.validators.ge(0))


def actor_child(
    id: str,
    factory: Callable[[], Actor[M]],
    *,
    mailbox: Mailbox[M] | None = None,
    mailbox_capacity: int = 64,
    coalesce_key: Callable[[M], Hashable | None] | None = None,
    restart: Restart = Restart.PERMANENT,
    shutdown: float = 5.0,
    kind: str | None = None,
) -> tuple[ChildSpec, Handle[M]]:
    """A child that runs a fresh `factory()` actor on each (re)start, always on the same mailbox.

    The mailbox outlives every incarnation (Erlang's registered name): the returned Handle
    stays valid across restarts and pending messages are handled by the next incarnation.
    `kind` names the actor for telemetry (default: `id`).
    """
    if mailbox is None:
        mailbox = Mailbox(mailbox_capacity, coalesce_key=coalesce_key)
    elif coalesce_key is not None:
        raise ValueError("pass coalesce_key to the Mailbox you supply, not to actor_child")
    handle: Handle[M] = Handle(mailbox, id=id)

    async def start(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        await run_actor(factory(), handle, kind=kind, task_status=task_status)

    return ChildSpec(id, start, restart=restart, shutdown=shutdown), handle

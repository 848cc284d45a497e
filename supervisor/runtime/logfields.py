"""Fields every log line of a subtree of tasks carries, e.g. the cluster a tree of actors serves.

trio gives each new task a copy of its spawner's context, so a field set at the top of a
supervision tree reaches every actor and helper task started under it (and their restarts),
and nothing outside it. supervisor.logs adds them to each record that does not name them itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

import trio

LOG_FIELDS: ContextVar[Mapping[str, str]] = ContextVar("log_fields", default=MappingProxyType({}))


def with_log_fields(start: Callable[..., Awaitable[None]], **fields: str) -> Callable[..., Awaitable[None]]:
    """`start` (a ChildSpec start) run with `fields` added to every log line under it."""

    async def run(task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        LOG_FIELDS.set({**LOG_FIELDS.get(), **fields})
        await start(task_status=task_status)

    return run

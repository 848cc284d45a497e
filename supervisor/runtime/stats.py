"""Frozen statistics records, trio-style: snapshots that are safe to keep and compare."""

from __future__ import annotations

import attrs

from supervisor.runtime.policy import Strategy


@attrs.frozen
class MailboxStatistics:
    depth: int
    """Messages waiting (a coalesced key counts once)."""
    capacity: int
    sent: int
    """Messages accepted by send/send_nowait, including those that replaced a pending one."""
    coalesced: int
    """Of `sent`, how many replaced a pending message with the same key."""


@attrs.frozen
class ChildStatistics:
    id: str
    running: bool
    """Started, reported ready and not exited."""
    restarts: int
    """Times this child was started again after its first start (also as a sibling)."""
    last_failure: str | None


@attrs.frozen
class SupervisorStatistics:
    name: str
    strategy: Strategy
    restarts_total: int
    """Restart decisions taken (each counted against the intensity)."""
    children: tuple[ChildStatistics, ...]

"""What the runtime tells an observer about itself: restarts, escalations, messages, drains.

The runtime knows nothing of Prometheus: it calls the one `RuntimeObserver` installed with
`observe_runtime` (by default one that ignores everything), and keeps the actors that run right
now so an observer can read their mailboxes' depth when it is asked, not on every message.
Kinds are bounded names ("cluster", "member", "members", ...), never a cluster's or member's name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from supervisor.runtime.stats import MailboxStatistics


class RuntimeObserver(Protocol):
    def restarted(self, supervisor: str) -> None:
        """A supervisor of this kind decided to restart a child."""

    def escalated(self, supervisor: str) -> None:
        """A supervisor of this kind exceeded its intensity and gave up."""

    def handled(self, actor: str) -> None:
        """An actor of this kind handled one message."""

    def drained(self, actor: str, seconds: float) -> None:
        """An actor of this kind ran on_drained (the cluster actor's reconcile) for `seconds`."""


class _Ignore:
    def restarted(self, supervisor: str) -> None:
        pass

    def escalated(self, supervisor: str) -> None:
        pass

    def handled(self, actor: str) -> None:
        pass

    def drained(self, actor: str, seconds: float) -> None:
        pass


observer: RuntimeObserver = _Ignore()
# The mailbox of every actor running now, with its kind.
_running: dict[Any, str] = {}


def observe_runtime(new: RuntimeObserver | None) -> None:
    """Install the process's observer (None: back to ignoring)."""
    global observer
    observer = new if new is not None else _Ignore()


@contextmanager
def running_actor(mailbox: Any, kind: str) -> Iterator[None]:
    _running[mailbox] = kind
    try:
        yield
    finally:
        _running.pop(mailbox, None)


def running_mailboxes() -> Iterator[tuple[str, MailboxStatistics]]:
    """(kind, statistics) of every running actor's mailbox."""
    for mailbox, kind in list(_running.items()):
        yield kind, mailbox.statistics()

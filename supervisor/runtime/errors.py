"""Exceptions the runtime raises to callers and to parent supervisors."""

from __future__ import annotations


class ActorStopped(Exception):
    """The actor stopped or crashed before it answered, or its mailbox is closed."""


class CallTimeout(Exception):
    """No reply arrived within the call's timeout (the request may still be handled later)."""


class CallSuperseded(Exception):
    """A newer message with the same coalescing key replaced the request before it was handled."""


class SupervisorEscalation(Exception):
    """A supervisor exceeded its restart intensity, stopped its children and gave up.

    Raised out of `Supervisor.run`, so a parent supervisor sees it as an ordinary crash
    of that child: that is how a failure climbs the tree.
    """

    def __init__(self, supervisor: str, child: str | None, last_failure: BaseException | None) -> None:
        super().__init__(supervisor, child, last_failure)
        self.supervisor = supervisor
        self.child = child
        self.last_failure = last_failure

    def __str__(self) -> str:
        return (
            f"supervisor {self.supervisor!r} gave up: restart intensity exceeded"
            f" (last failure in child {self.child!r}: {self.last_failure!r})"
        )


def leaf_exceptions(exc: BaseException) -> list[BaseException]:
    """Every exception inside `exc`, exception groups flattened (depth first, in order)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaf_exceptions(inner)]
    return [exc]

"""What the API server's refusals mean for a member step: they fail it (held off, retried),
or, while the namespace is being deleted, stop the cluster's steps. Unreachable is neither:
the supervisor's restart with backoff waits for the API server."""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from actors.errors import NamespaceTerminating, RuntimeRefused
from supervisor.kube.client import KubeError, KubeUnavailable, is_namespace_terminating
from supervisor.runtime import leaf_exceptions

P = ParamSpec("P")
S = TypeVar("S")
T = TypeVar("T")


def refusals_fail_the_step(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """An answer of the API server other than "unreachable" fails the step (RuntimeRefused):
    the cluster actor holds off and looks again, instead of crashing and restarting, which
    would lose what it had observed and fill the log while a namespace is being deleted."""

    @functools.wraps(method)
    async def refusals_as_failures(self: S, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(self, *args, **kwargs)
        except KubeUnavailable:
            raise  # the API server is away: the supervisor's restart with backoff waits for it
        except KubeError as exc:
            raise refusal(str(exc), exc) from exc
        except BaseExceptionGroup as group:  # calls made side by side
            found = refusal_in(group)
            if found is None:
                raise
            raise found from group

    return refusals_as_failures


def refusal(message: str, *errors: BaseException) -> RuntimeRefused:
    terminating = any(is_namespace_terminating(e) for e in errors)
    return (NamespaceTerminating if terminating else RuntimeRefused)(message)


def refusal_in(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """What a group of API errors from calls made side by side amounts to: the API server
    unreachable if any call found it so, else a refusal; None if anything else failed."""
    leaves = leaf_exceptions(group)
    refused = [leaf for leaf in leaves if isinstance(leaf, RuntimeRefused)]
    found = api_error_in(
        BaseExceptionGroup("answers", [leaf for leaf in leaves if leaf not in refused] or refused)
    )
    if isinstance(found, KubeUnavailable):
        return found
    if found is None and len(refused) < len(leaves):
        return None  # something else than an answer or a refusal (a step's own) failed
    # A step of our own refused side by side (brought certificates unusable) is a refusal too.
    return refusal("; ".join(str(leaf) for leaf in leaves), *leaves)


def api_error_in(group: BaseExceptionGroup[BaseException]) -> KubeError | None:
    """The one API error that calls made side by side failed with: the API server unreachable
    if any call found it so, else the first answer; None if anything else failed."""
    leaves = leaf_exceptions(group)
    errors = [leaf for leaf in leaves if isinstance(leaf, KubeError)]
    if len(errors) < len(leaves):
        return None
    away = [e for e in errors if isinstance(e, KubeUnavailable)]
    return (away or errors)[0]

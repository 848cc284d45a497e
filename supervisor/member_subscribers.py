"""Who hears of member changes: the runtimes' side of `MemberRuntime.watch_members`.

Both runtimes (local processes, Kubernetes pods) hold their subscribers here, so they agree on
what a failing callback does: it is logged and contained. A subscriber is the cluster actor's
nudge; one that raises must not stop the others hearing of the change, nor end the watch (or
the process watcher) that dispatched it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from actors.model import ClusterRef
from actors.ports import MemberChanged

log = logging.getLogger(__name__)


class MemberSubscribers:
    """The callbacks subscribed to each cluster's member changes."""

    def __init__(self) -> None:
        self._callbacks: dict[ClusterRef, list[MemberChanged]] = {}

    def subscribe(self, cluster: ClusterRef, on_change: MemberChanged) -> Callable[[], None]:
        """Call on_change(member name) on each change of `cluster`; returns the unsubscribe function."""
        self._callbacks.setdefault(cluster, []).append(on_change)

        def unsubscribe() -> None:
            callbacks = self._callbacks.get(cluster, [])
            if on_change in callbacks:
                callbacks.remove(on_change)
            if not callbacks:
                self._callbacks.pop(cluster, None)

        return unsubscribe

    def dispatch(self, cluster: ClusterRef, member: str) -> None:
        """Tell every subscriber of `cluster` that `member` changed; a callback that raises is
        logged, and the others are still told."""
        for callback in list(self._callbacks.get(cluster, ())):
            try:
                callback(member)
            except Exception:
                log.exception("member-change callback %r failed for %s/%s", callback, cluster, member)

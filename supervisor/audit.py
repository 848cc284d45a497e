"""The audit trail in the log: one line per operation on a cluster, whichever mode records it.

`AuditLogged` wraps the mode's own EventSink (events.jsonl locally, core/v1 Events on
Kubernetes), so the line reads the same in both and is written in one place.
"""

from __future__ import annotations

import logging

from actors.measurements import Measurement
from actors.model import ClusterRef
from actors.ports import EventSink

log = logging.getLogger(__name__)


class AuditLogged:
    """actors.ports.EventSink: logs the operation (`event: audit`), then hands it to `inner`."""

    def __init__(self, inner: EventSink) -> None:
        self._inner = inner

    async def record(
        self,
        cluster: ClusterRef,
        *,
        reason: str,
        message: str,
        warning: bool = False,
        measured: Measurement | None = None,
    ) -> None:
        extra = {"event": "audit", "cluster": str(cluster), "reason": reason}
        level = logging.WARNING if warning else logging.INFO
        log.log(level, "%s: %s: %s", cluster, reason, message, extra=extra)
        await self._inner.record(cluster, reason=reason, message=message, warning=warning, measured=measured)

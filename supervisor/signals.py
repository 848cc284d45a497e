"""Graceful stop on SIGINT/SIGTERM, shared by every way the daemon runs."""

from __future__ import annotations

import logging
import signal

import trio

log = logging.getLogger(__name__)


async def cancel_on_signal(scope: trio.CancelScope) -> None:
    """Cancel `scope` at the first SIGINT or SIGTERM; what it covers then stops in order."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("%s: stopping", signal.Signals(signum).name, extra={"event": "shutdown"})
            scope.cancel()
            return

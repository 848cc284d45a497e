"""The log level from a file, followed at run time: on Kubernetes, the ConfigMap's LOG_LEVEL key
mounted as a volume (the kubelet rewrites the file when the ConfigMap changes; no restart)."""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from supervisor.logs import LEVELS, current_level, set_level

log = logging.getLogger(__name__)


async def follow_log_level_file(path: Path, *, every: float = 2.0) -> None:
    """Apply the file's level whenever it changes; a bad value is reported and changes nothing."""
    last: str | None = None
    while True:
        try:
            text = (await trio.Path(path).read_text()).strip().lower()
        except OSError:
            text = None
        if text is not None and text != last:
            last = text
            if text not in LEVELS:
                log.error(
                    "%s: log level %r is not one of %s; keeping %s",
                    path,
                    text,
                    ", ".join(LEVELS),
                    current_level(),
                    extra={"event": "log-level"},
                )
            elif text != current_level():
                log.warning(
                    "log level %s -> %s (%s)", current_level(), text, path, extra={"event": "log-level"}
                )
                set_level(text)
        await trio.sleep(every)

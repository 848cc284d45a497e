"""Structured logs: one JSON object per line (or plain text for a person at a terminal)."""

from __future__ import annotations

import json
import logging
import sys
import time

from supervisor.runtime.logfields import LOG_FIELDS

# Attributes every LogRecord has; anything else came in through `extra=` and is a field.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class ContextFields(logging.Filter):
    """Adds the task's log fields (the `cluster` of an actor tree) to records without them."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in LOG_FIELDS.get().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


def configure_logging(*, level: str = "info", fmt: str = "json", stream=sys.stderr) -> None:  # type: ignore[no-untyped-def]
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFields())
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


LEVELS = ("debug", "info", "warning", "error")


def current_level() -> str:
    return logging.getLevelName(logging.getLogger().level).lower()


def set_level(level: str) -> None:
    """Change the root level at run time (HTTP /loglevel, SIGUSR1/SIGUSR2, the ConfigMap)."""
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    logging.getLogger().setLevel(level.upper())

"""What a supervisor restarts, and how much restarting it tolerates (OTP semantics)."""

from __future__ import annotations

import enum

import attrs


class Restart(enum.Enum):
    PERMANENT = "permanent"
    """Always restarted, even after a normal exit."""
    TRANSIENT = "transient"
    """Restarted only after an abnormal exit (an exception); removed after a normal one."""
    TEMPORARY = "temporary"
    """Never restarted; removed when it exits."""


class Strategy(enum.Enum):
    ONE_FOR_ONE = "one_for_one"
    """Only the failed child is restarted."""
    ONE_FOR_ALL = "one_for_all"
    """All children are stopped (reverse order) and restarted (start order)."""
    REST_FOR_ONE = "rest_for_one"
    """The failed child and those started after it are stopped and restarted."""


@attrs.frozen
class Intensity:
    """More than `max_restarts` restarts within `within` seconds makes the supervisor give up."""

    max_restarts: int = attrs.field(default=3, validator=attrs.validators.ge(0))
    within: float = attrs.field(default=5.0, validator=attrs.validators.gt(0))

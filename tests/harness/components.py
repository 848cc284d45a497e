"""The one rule for a real component a test needs but cannot find.

Locally that is a skip with a one-line reason; under CI=true it is a failure, because a
missing component must never turn CI green.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NoReturn, TypeVar

import pytest

T = TypeVar("T")


class MissingComponent(Exception):
    """A real component (binary, build) a test needs is not available; the message says why."""


def missing(reason: str) -> NoReturn:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


# First answers per component, good or bad: a failed build is not retried for every test.
_looked_up: dict[str, object] = {}


def require(name: str, find: Callable[[], T]) -> T:
    """find() once per session; its MissingComponent becomes a skip or a CI failure."""
    if name not in _looked_up:
        try:
            _looked_up[name] = find()
        except MissingComponent as exc:
            _looked_up[name] = exc
    found = _looked_up[name]
    if isinstance(found, MissingComponent):
        missing(str(found))
    return found  # type: ignore[return-value]

"""The one rule for a real component a test needs but cannot find.

Locally that is a skip with a one-line reason; under CI=true it is a failure, because a
missing component must never turn CI green.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
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


def go_install_cached(build_script: Path, name: str, make_target: str) -> Path:
    """The binary `build_script` (a tests/envtest/go-install-cached.sh caller with a `version=`
    line) made for its pinned version; never built from a test."""
    version = re.search(r"^version=(\S+)$", build_script.read_text(), re.M)
    assert version, f"no version= line in {build_script}"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    binary = cache / "etcd-supervisor" / name / version.group(1) / name
    if not binary.exists():
        raise MissingComponent(f"{name} not built ({binary}): run `make {make_target}`")
    return binary

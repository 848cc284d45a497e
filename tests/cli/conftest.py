"""Fixtures for the CLI tests: a real daemon process per test, run from a directory of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.procs import kill_all_mentioning


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """The daemon's working directory; no process mentioning it outlives the test, pass or fail."""
    yield tmp_path
    kill_all_mentioning(str(tmp_path))

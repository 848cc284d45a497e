"""Fixtures for the real-etcd tier: each module runs once per etcd version (3.5, 3.7, and 3.4 if present)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from supervisor.aio import open_asyncio_loop
from tests.harness.etcd import EtcdBinaries, binaries_or_skip, version_params


@pytest.fixture(scope="module", params=version_params())
def binaries(request: pytest.FixtureRequest) -> EtcdBinaries:
    return binaries_or_skip(request.param)


@pytest.fixture
async def asyncio_loop() -> AsyncIterator[None]:
    """The asyncio loop the client needs, open around the test (as the daemon opens it at its root).

    Request it as a test argument: through ``usefixtures`` pytest-trio does not hand the
    fixture's context (where trio-asyncio keeps its loop) to the test.
    """
    async with open_asyncio_loop():
        yield

"""Fixtures for the real-etcd tier: each module runs once per etcd version (3.5, 3.7, and 3.4 if present)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from supervisor.aio import open_asyncio_loop
from tests.harness.etcd import EtcdBinaries, EtcdCluster, binaries_or_skip, running_cluster, version_params


@pytest.fixture(scope="module", params=version_params())
def binaries(request: pytest.FixtureRequest) -> EtcdBinaries:
    return binaries_or_skip(request.param)


@pytest.fixture(scope="module")
def one_member(binaries: EtcdBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """A one-member cluster of the module's etcd version, shared by the module's tests."""
    with running_cluster(binaries, tmp_path_factory.mktemp("one-member"), size=1) as cluster:
        yield cluster


@pytest.fixture
async def asyncio_loop() -> AsyncIterator[None]:
    """The asyncio loop the client needs, open around the test (as the daemon opens it at its root).

    Request it as a test argument: through ``usefixtures`` pytest-trio does not hand the
    fixture's context (where trio-asyncio keeps its loop) to the test.
    """
    async with open_asyncio_loop():
        yield

"""Session-wide real components that several test tiers share: one S3-compatible server (moto)
and one GCS-compatible server (fake-gcs-server) per test session, stopped at its end; and, when
the suite runs on several xdist workers (`make test`), which tests share a worker
(tests/harness/parallel.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from supervisor.local.processes import PORT_RANGE_ENV
from tests.harness.components import require
from tests.harness.objstore import (
    AzuriteServer,
    GcsServer,
    S3Server,
    azurite_binary,
    fake_gcs_binary,
    moto_server_binary,
    open_azurite,
    open_fake_gcs_server,
    open_moto_server,
)
from tests.harness.parallel import dispatch_rank, group_of


def pytest_configure(config: pytest.Config) -> None:
    """Each xdist worker's local members (and the daemons its tests start) take ports from a
    slice of their own: a port a stopped member keeps for its restart is then never picked by
    another worker's member meanwhile ("bind: address already in use", the member replaced)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and PORT_RANGE_ENV not in os.environ:
        first = 20000 + (int(worker.removeprefix("gw")) % 4) * 3000
        os.environ[PORT_RANGE_ENV] = f"{first}-{first + 2999}"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    require("moto_server", moto_server_binary)
    with open_moto_server(tmp_path_factory.mktemp("moto")) as server:
        yield server


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsServer]:
    require("fake-gcs-server", fake_gcs_binary)
    with open_fake_gcs_server(tmp_path_factory.mktemp("fake-gcs")) as server:
        yield server


@pytest.fixture(scope="session")
def azurite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteServer]:
    require("azurite", azurite_binary)
    with open_azurite(tmp_path_factory.mktemp("azurite")) as server:
        yield server


@pytest.hookimpl(wrapper=True)  # the groups are set before xdist reads them, checked after
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    # xdist hands its workers `dist` as "no" and `loadgroup` as what was asked; the workers are
    # where the groups must be set (they send the test ids, groups included, to the controller).
    if not getattr(config.option, "loadgroup", False):
        return (yield)  # a plain run keeps the files' order
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item.fixturenames, item.nodeid.split("::")[0])))
    # Longest groups first: sorted() is stable, so each group keeps its tests' order.
    items.sort(key=lambda item: dispatch_rank(_group(item)))
    result = yield
    if items and "@" not in items[0].nodeid:
        # Ungrouped, every test is its own unit: the tiers' components start on every worker and
        # the node tiers wait on one another's lock (a run 15+ minutes longer, and still green).
        raise pytest.UsageError(
            "pytest-xdist did not put the groups into the test ids (a pytest it does not support?):"
            " see the pytest pin in pyproject.toml"
        )
    return result


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0]) if marker else ""

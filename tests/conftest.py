"""Session-wide real components that several test tiers share: one S3-compatible server (moto)
and one GCS-compatible server (fake-gcs-server) per test session, stopped at its end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.components import require
from tests.harness.objstore import (
    GcsServer,
    S3Server,
    fake_gcs_binary,
    moto_server_binary,
    open_fake_gcs_server,
    open_moto_server,
)


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

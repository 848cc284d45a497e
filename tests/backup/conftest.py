"""A real S3-compatible server (moto) for the backup tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.components import require
from tests.harness.objstore import S3Server, moto_server_binary, open_moto_server


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    require("moto_server", moto_server_binary)
    with open_moto_server(tmp_path_factory.mktemp("moto")) as server:
        yield server

"""Stores of every kind over the session's servers (tests/conftest.py starts them)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.model import AzureStore, GcsStore, LocalStore, S3Store, StoreSpec
from actors.store_port import AzureCredentials, ObjectStore, S3Credentials
from supervisor.stores import open_store
from tests.harness.objstore import (
    AzuriteServer,
    GcsServer,
    S3Server,
)


@pytest.fixture(params=["local", "s3", "gcs", "azure"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(store_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., ObjectStore]:
    """make_store(prefix="") -> a store of `store_kind` on a bucket (or directory) of this test's own."""
    bucket = f"t-{uuid.uuid4().hex[:16]}"
    if store_kind == "s3":
        s3: S3Server = request.getfixturevalue("s3_server")
        s3.create_bucket(bucket)
        creds = S3Credentials(s3.access_key_id, s3.secret_access_key)
        return lambda prefix="": open_store(
            StoreSpec(s3=S3Store(bucket=bucket, prefix=prefix, endpoint=s3.endpoint)), credentials=creds
        )
    if store_kind == "gcs":
        gcs: GcsServer = request.getfixturevalue("gcs_server")
        gcs.create_bucket(bucket)
        return lambda prefix="": open_store(
            StoreSpec(gcs=GcsStore(bucket=bucket, prefix=prefix, endpoint=gcs.endpoint)), credentials=None
        )
    if store_kind == "azure":
        azure: AzuriteServer = request.getfixturevalue("azurite_server")
        azure.create_container(bucket)
        creds = AzureCredentials(azure.account_name, azure.account_key)
        return lambda prefix="": open_store(
            StoreSpec(azure=AzureStore(container=bucket, prefix=prefix, endpoint=azure.endpoint)),
            credentials=creds,
        )
    return lambda prefix="": open_store(
        StoreSpec(local=LocalStore(str(tmp_path / "store" / prefix))), credentials=None
    )


@pytest.fixture
def store_of(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], ObjectStore]:
    """store_of(kind) -> a store of that kind on a bucket (container, directory) of its own."""

    def make(kind: str) -> ObjectStore:
        bucket = f"c-{uuid.uuid4().hex[:16]}"
        if kind == "s3":
            s3: S3Server = request.getfixturevalue("s3_server")
            creds = S3Credentials(s3.access_key_id, s3.secret_access_key)
            spec = StoreSpec(s3=S3Store(bucket=s3.create_bucket(bucket), endpoint=s3.endpoint))
            return open_store(spec, credentials=creds)
        if kind == "gcs":
            gcs: GcsServer = request.getfixturevalue("gcs_server")
            spec = StoreSpec(gcs=GcsStore(bucket=gcs.create_bucket(bucket), endpoint=gcs.endpoint))
            return open_store(spec, credentials=None)
        if kind == "azure":
            az: AzuriteServer = request.getfixturevalue("azurite_server")
            spec = StoreSpec(azure=AzureStore(container=az.create_container(bucket), endpoint=az.endpoint))
            return open_store(spec, credentials=AzureCredentials(az.account_name, az.account_key))
        return open_store(StoreSpec(local=LocalStore(str(tmp_path / bucket))), credentials=None)

    return make

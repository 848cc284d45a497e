"""parse_store: the store object of spec.backup.store / spec.restore.store, every broken rule named."""

from __future__ import annotations

from typing import Any

import pytest

from actors.codec import Reader, parse_store
from actors.model import AzureStore, GcsStore, LocalStore, S3Store, StoreSpec

PATH = "spec.backup.store"


def parse(doc: Any) -> tuple[StoreSpec | None, list[str]]:
    reader = Reader()
    store = parse_store(doc, PATH, reader)
    return store, [str(e) for e in reader.errors]


def test_each_kind_of_store() -> None:
    assert parse({"local": {"path": "backups"}}) == (StoreSpec(local=LocalStore("backups")), [])
    s3 = {"bucket": "b-1", "prefix": "etcd/", "endpoint": "http://127.0.0.1:9000", "region": "eu-west-1",
          "credentialsSecret": "s3-creds"}  # fmt: skip
    assert parse({"s3": s3}) == (
        StoreSpec(s3=S3Store("b-1", "etcd/", "http://127.0.0.1:9000", "eu-west-1", "s3-creds")),
        [],
    )
    assert parse({"gcs": {"bucket": "my_bucket"}}) == (StoreSpec(gcs=GcsStore("my_bucket")), [])
    assert StoreSpec(gcs=GcsStore("my_bucket")).describe() == "gcs bucket 'my_bucket'"
    azure = {"container": "etcd-backups", "prefix": "etcd/", "endpoint": "http://127.0.0.1:10000/devstoreaccount1",
             "credentialsSecret": "az-creds"}  # fmt: skip
    assert parse({"azure": azure}) == (
        StoreSpec(
            azure=AzureStore("etcd-backups", "etcd/", "http://127.0.0.1:10000/devstoreaccount1", "az-creds")
        ),
        [],
    )


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        ({}, f"{PATH}: must name exactly one store of local, s3, gcs, azure (got none)"),
        ({"local": {"path": "/x"}, "s3": {"bucket": "bbb"}}, f"{PATH}: must name exactly one store of"),
        ("s3", f"{PATH}: must be an object with exactly one of local, s3, gcs, azure"),
        ({"local": {}}, f"{PATH}.local.path: required: the directory backups are written to"),
        ({"s3": {}}, f"{PATH}.s3.bucket: required"),
        ({"s3": {"bucket": "Bad_Bucket"}}, f"{PATH}.s3.bucket: must be a bucket name"),
        ({"s3": {"bucket": "bbb", "prefix": "/abs"}}, f"{PATH}.s3.prefix: must be a relative key prefix"),
        ({"gcs": {"bucket": "bbb", "endpoint": "localhost:4443"}}, f"{PATH}.gcs.endpoint: must be an http"),
        ({"gcs": {"bucket": "bbb", "credentialsSecret": "No!"}}, f"{PATH}.gcs.credentialsSecret: must be"),
        ({"s3": {"bucket": "bbb", "acl": "private"}}, f"{PATH}.s3.acl: unknown field"),
        ({"azure": {}}, f"{PATH}.azure.container: required"),
        ({"azure": {"container": "Bad--name"}}, f"{PATH}.azure.container: must be a container name"),
        ({"azure": {"container": "ok-name", "endpoint": "x"}}, f"{PATH}.azure.endpoint: must be an http"),
        ({"minio": {}}, f"{PATH}.minio: unknown field (a store is one of local, s3, gcs, azure)"),
    ],
)  # fmt: skip
def test_broken_rules_name_the_field(doc: Any, error: str) -> None:
    store, errors = parse(doc)
    assert store is None
    assert any(e.startswith(error) for e in errors), errors


def test_two_stores_say_which() -> None:
    _, errors = parse({"local": {"path": "/x"}, "s3": {"bucket": "bbb"}})
    assert errors == [f"{PATH}: must name exactly one store of local, s3, gcs, azure (got local, s3)"]

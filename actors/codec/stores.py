"""Where backups go: a store's document (local, s3 or gcs) -> StoreSpec, with its rules."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from actors.codec.fields import SECRET_NAME_PATTERN, Reader, secret_name
from actors.model import AzureStore, GcsStore, LocalStore, S3Store, StoreSpec

# Bucket names as the stores define them: S3 3-63 of lowercase letters, digits, dots and
# hyphens; GCS also underscores (and up to 222 characters with dots, rare enough to refuse).
S3_BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
GCS_BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
# An EtcdBackup's name: Kubernetes allows a DNS subdomain; locally it also becomes <name>.json.
BACKUP_NAME_PATTERN = SECRET_NAME_PATTERN
ENDPOINT_PATTERN = re.compile(r"^https?://[^\s/]+(/\S*)?$")
STORE_KINDS = ("local", "s3", "gcs", "azure")
# Azure container names: 3-63 lowercase letters, digits and single hyphens, not at either end.
AZURE_CONTAINER_PATTERN = re.compile(r"^(?=.{3,63}$)[a-z0-9]+(-[a-z0-9]+)*$")


def parse_store(doc: Any, path: str, reader: Reader) -> StoreSpec | None:
    """A store object (`path` is where it sits, e.g. spec.backup.store) -> StoreSpec.

    None when a rule is broken; the reader then holds every broken rule.
    """
    if not isinstance(doc, Mapping):
        reader.fail(path, "must be an object with exactly one of local, s3, gcs, azure")
        return None
    for unknown in sorted(set(doc) - set(STORE_KINDS)):
        reader.fail(f"{path}.{unknown}", "unknown field (a store is one of local, s3, gcs, azure)")
    named = [kind for kind in STORE_KINDS if doc.get(kind) is not None]
    if len(named) != 1:
        got = ", ".join(named) if named else "none"
        reader.fail(path, f"must name exactly one store of local, s3, gcs, azure (got {got})")
        return None
    kind = named[0]
    errors_before = len(reader.errors)
    where = f"{path}.{kind}"
    if kind == "local":
        store = StoreSpec(local=_local_store(doc, where, reader))
    elif kind == "s3":
        store = StoreSpec(s3=_s3_store(doc, where, reader))
    elif kind == "gcs":
        store = StoreSpec(gcs=_gcs_store(doc, where, reader))
    else:
        store = StoreSpec(azure=_azure_store(doc, where, reader))
    return store if len(reader.errors) == errors_before else None


def _local_store(doc: Mapping[str, Any], where: str, r: Reader) -> LocalStore:
    fields = r.mapping(doc, "local", where, {"path"})
    path = r.string(fields, "path", f"{where}.path", None)
    if not path:
        r.fail(f"{where}.path", "required: the directory backups are written to")
    return LocalStore(path=path or "")


def _s3_store(doc: Mapping[str, Any], where: str, r: Reader) -> S3Store:
    fields = r.mapping(doc, "s3", where, {"bucket", "prefix", "endpoint", "region", "credentialsSecret"})
    return S3Store(
        bucket=_bucket(fields, where, r, S3_BUCKET_PATTERN, "3-63 lowercase letters, digits, dots, hyphens"),
        prefix=_key_prefix(fields, where, r),
        endpoint=_endpoint(fields, where, r),
        region=r.string(fields, "region", f"{where}.region", None),
        credentials_secret=secret_name(fields, "credentialsSecret", f"{where}.credentialsSecret", r),
    )


def _gcs_store(doc: Mapping[str, Any], where: str, r: Reader) -> GcsStore:
    fields = r.mapping(doc, "gcs", where, {"bucket", "prefix", "endpoint", "credentialsSecret"})
    return GcsStore(
        bucket=_bucket(fields, where, r, GCS_BUCKET_PATTERN, "3-63 lowercase letters, digits, ., _, -"),
        prefix=_key_prefix(fields, where, r),
        endpoint=_endpoint(fields, where, r),
        credentials_secret=secret_name(fields, "credentialsSecret", f"{where}.credentialsSecret", r),
    )


def _azure_store(doc: Mapping[str, Any], where: str, r: Reader) -> AzureStore:
    fields = r.mapping(doc, "azure", where, {"container", "prefix", "endpoint", "credentialsSecret"})
    container = r.string(fields, "container", f"{where}.container", None)
    if container is None:
        r.fail(f"{where}.container", "required")
    elif not AZURE_CONTAINER_PATTERN.match(container):
        rule = "3-63 lowercase letters, digits and single hyphens, a letter or digit at each end"
        r.fail(f"{where}.container", f"must be a container name: {rule} (got {container!r})")
    return AzureStore(
        container=container or "",
        prefix=_key_prefix(fields, where, r),
        endpoint=_endpoint(fields, where, r),
        credentials_secret=secret_name(fields, "credentialsSecret", f"{where}.credentialsSecret", r),
    )


def _bucket(fields: Mapping[str, Any], where: str, r: Reader, pattern: re.Pattern[str], rule: str) -> str:
    bucket = r.string(fields, "bucket", f"{where}.bucket", None)
    if bucket is None:
        r.fail(f"{where}.bucket", "required")
    elif not pattern.match(bucket):
        r.fail(f"{where}.bucket", f"must be a bucket name: {rule} (got {bucket!r})")
    return bucket or ""


def _key_prefix(fields: Mapping[str, Any], where: str, r: Reader) -> str:
    prefix = r.string(fields, "prefix", f"{where}.prefix", "") or ""
    if prefix.startswith("/") or ".." in prefix.split("/"):
        r.fail(f"{where}.prefix", f"must be a relative key prefix such as etcd/ (got {prefix!r})")
    return prefix


def _endpoint(fields: Mapping[str, Any], where: str, r: Reader) -> str | None:
    endpoint = r.string(fields, "endpoint", f"{where}.endpoint", None)
    if endpoint is not None and not ENDPOINT_PATTERN.match(endpoint):
        r.fail(f"{where}.endpoint", f"must be an http:// or https:// URL (got {endpoint!r})")
    return endpoint

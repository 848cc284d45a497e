"""open_store: a StoreSpec (spec.backup.store) and its credentials -> an ObjectStore."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import obstore.exceptions
from obstore.store import AzureStore, S3Store

from actors.errors import StoreError
from actors.model import AzureStore as AzureSpec
from actors.model import GcsStore, LocalStore, StoreSpec
from actors.model import S3Store as S3Spec
from actors.store_port import AzureCredentials, ObjectStore, S3Credentials, StoreCredentials
from supervisor.stores.cloud import ObjectLock, ObstoreStore, Transfer
from supervisor.stores.gcs import open_gcs
from supervisor.stores.local import LocalDirectoryStore
from supervisor.stores.s3_retention import S3Retention


@attrs.frozen
class StoreOptions:
    """Bounds of every remote call: an unreachable endpoint fails within about
    connect_timeout * (retries + 1) plus the backoff between tries, never hangs."""

    connect_timeout: float = 5.0
    # One request (a part of a multipart upload, a listing page); a stalled one is retried.
    request_timeout: float = 120.0
    retries: int = 3
    retry_timeout: float = 60.0
    transfer: Transfer = attrs.field(factory=Transfer)


def open_store(
    spec: StoreSpec,
    *,
    credentials: StoreCredentials,
    relative_to: Path | None = None,
    options: StoreOptions | None = None,
    lock_days: int | None = None,
) -> ObjectStore:
    """The store `spec` names. A relative local path resolves against `relative_to` (locally: the
    manifest's directory). Opening does no I/O: a bad bucket or credentials show on first use.
    `lock_days`: every object put is locked that long (S3 object lock; ValueError for another
    kind, which the codec refuses before)."""
    options = options or StoreOptions()
    store = spec.chosen
    if lock_days is not None and not isinstance(store, S3Spec):
        raise ValueError(f"{store.describe()} cannot lock objects")
    if isinstance(store, LocalStore):
        path = Path(store.path)
        return LocalDirectoryStore(relative_to / path if relative_to and not path.is_absolute() else path)
    if isinstance(store, GcsStore):
        timeouts = (options.connect_timeout, options.request_timeout, options.retry_timeout)
        return open_gcs(store, credentials, transfer=options.transfer, timeouts=timeouts)
    lock = None
    backend: AzureStore | S3Store
    try:
        if isinstance(store, AzureSpec):
            backend = _azure(store, credentials, options)
        else:
            backend = _s3(store, credentials, options)
            if lock_days is not None:
                lock = _object_lock(store, lock_days, credentials, options)
    except obstore.exceptions.BaseError as exc:
        # Building the client can fail too (no CA certificates in the image, a malformed
        # endpoint): a failed backup with the reason, never a crashed actor.
        raise StoreError(f"{store.describe()}: cannot open a client: {exc}") from exc
    return ObstoreStore(backend, name=store.describe(), transfer=options.transfer, lock=lock)


def _client(options: StoreOptions, endpoint: str | None) -> dict[str, Any]:
    return {
        "connect_timeout": timedelta(seconds=options.connect_timeout),
        "timeout": timedelta(seconds=options.request_timeout),
        "allow_http": bool(endpoint and endpoint.startswith("http://")),
    }


def _retry(options: StoreOptions) -> dict[str, Any]:
    return {
        "max_retries": options.retries,
        "retry_timeout": timedelta(seconds=options.retry_timeout),
        "backoff": {"init_backoff": timedelta(milliseconds=200), "max_backoff": timedelta(seconds=5)},
    }


def _azure(store: AzureSpec, credentials: StoreCredentials, options: StoreOptions) -> AzureStore:
    config: dict[str, Any] = {}
    if store.endpoint:  # Azurite, a private endpoint: the account is in the URL's path
        config["endpoint"] = store.endpoint
    if isinstance(credentials, AzureCredentials):
        config.update(account_name=credentials.account_name, account_key=credentials.account_key)
    elif credentials is not None:
        raise ValueError(f"{store.describe()}: Azure needs an account key, not {type(credentials).__name__}")
    return AzureStore(
        store.container,
        prefix=store.prefix.strip("/") or None,
        config=config,  # type: ignore[arg-type]
        client_options=_client(options, store.endpoint),  # type: ignore[arg-type]
        retry_config=_retry(options),  # type: ignore[arg-type]
    )


def _object_lock(
    store: S3Spec, days: int, credentials: StoreCredentials, options: StoreOptions
) -> ObjectLock:
    def writer(headers: dict[str, str]) -> S3Store:
        # The checksum S3 wants with a locked put (x-amz-checksum-sha256 of the body).
        return _s3(store, credentials, options, headers=headers, checksum_algorithm="sha256")

    retention = S3Retention(
        store,
        credentials,
        connect_timeout=options.connect_timeout,
        request_timeout=options.request_timeout,
        retries=options.retries,
    )
    return ObjectLock(days, writer, retention)


def _s3(
    store: S3Spec,
    credentials: StoreCredentials,
    options: StoreOptions,
    *,
    headers: dict[str, str] | None = None,
    **extra: str,
) -> S3Store:
    config: dict[str, Any] = {"region": store.region or "us-east-1", **extra}
    if store.endpoint:
        # S3-compatible servers (MinIO, moto, Ceph) answer on paths, not bucket host names.
        config.update(endpoint=store.endpoint, virtual_hosted_style_request=False)
    if isinstance(credentials, S3Credentials):
        config.update(
            access_key_id=credentials.access_key_id, secret_access_key=credentials.secret_access_key
        )
    elif credentials is not None:
        raise ValueError(f"{store.describe()}: S3 needs an access key, not {type(credentials).__name__}")
    client = _client(options, store.endpoint)
    if headers:
        client["default_headers"] = headers
    return S3Store(
        store.bucket,
        prefix=store.prefix.strip("/") or None,
        config=config,  # type: ignore[arg-type]
        client_options=client,  # type: ignore[arg-type]
        retry_config=_retry(options),  # type: ignore[arg-type]
    )

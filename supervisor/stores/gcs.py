"""The GCS store through Google's own client (google-cloud-storage), not obstore.

obstore (object_store) writes GCS through its XML API (PUT object, XML multipart uploads), which
GCS emulators such as fake-gcs-server do not serve ("invalid uploadType"), so that path could
never be tested against a real server here. Google's client uploads through the JSON API's
resumable uploads: streamed one part at a time, finalised only when complete (an aborted put
leaves nothing), and served by both GCS and its emulators. Its calls block; each runs in a trio
worker thread, as obstore's do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

import trio
from google.api_core import exceptions as api_errors
from google.api_core.client_options import ClientOptions
from google.api_core.retry import Retry, if_transient_error
from google.auth import exceptions as auth_errors
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
from google.cloud.storage.exceptions import InvalidResponse
from google.oauth2 import service_account
from requests import exceptions as http_errors

from actors.errors import StoreAccessDenied, StoreError, StoreFull, StoreNotFound, StoreUnavailable
from actors.model import GcsStore
from actors.store_port import GcsCredentials, ObjectInfo, StoreCredentials, StoredObject
from supervisor.stores.cloud import READ_CHUNK, Transfer, pull_from_trio
from supervisor.stores.keys import check_key

# Resumable uploads send parts in multiples of 256 KiB.
_UPLOAD_QUANTUM = 256 << 10


class GcsClientStore:
    """ObjectStore on one bucket; the spec's prefix is prepended here to every key."""

    def __init__(
        self,
        spec: GcsStore,
        client: storage.Client,
        *,
        transfer: Transfer,
        timeout: tuple[float, float],
        retry: Retry,
    ) -> None:
        self._name = spec.describe()
        self._bucket = client.bucket(spec.bucket)
        self._prefix = spec.prefix.strip("/") + "/" if spec.prefix.strip("/") else ""
        self._client = client
        self._part = max(_UPLOAD_QUANTUM, transfer.part_size // _UPLOAD_QUANTUM * _UPLOAD_QUANTUM)
        self._timeout = timeout
        self._retry = retry

    def describe(self) -> str:
        return self._name

    async def put_stream(self, key: str, chunks: AsyncIterable[bytes]) -> StoredObject:
        blob = self._blob(key)
        digest = hashlib.sha256()
        sizes = [0]

        def upload() -> None:
            # BlobWriter finalises the resumable upload on a clean close and cancels it when the
            # block raises (a cancelled or failed source), so no partial object is ever visible.
            with blob.open("wb", chunk_size=self._part, timeout=self._timeout, retry=self._retry) as out:
                for chunk in pull_from_trio([], aiter(chunks)):
                    digest.update(chunk)
                    sizes[0] += len(chunk)
                    out.write(chunk)

        await self._call("put", key, upload)
        return StoredObject(key=key, size=sizes[0], sha256=digest.hexdigest())

    async def put_bytes(self, key: str, data: bytes) -> StoredObject:
        blob = self._blob(key)
        await self._call(
            "put", key, lambda: blob.upload_from_string(data, timeout=self._timeout, retry=self._retry)
        )
        return StoredObject(key=key, size=len(data), sha256=hashlib.sha256(data).hexdigest())

    async def get_stream(self, key: str) -> AsyncIterator[bytes]:
        blob = self._blob(key)
        reader = await self._call(
            "get",
            key,
            lambda: blob.open("rb", chunk_size=READ_CHUNK, timeout=self._timeout, retry=self._retry),
        )
        try:
            while chunk := await self._call("get", key, reader.read, READ_CHUNK):
                yield chunk
        finally:
            reader.close()

    async def get_bytes(self, key: str) -> bytes:
        blob = self._blob(key)
        data = await self._call(
            "get", key, lambda: blob.download_as_bytes(timeout=self._timeout, retry=self._retry)
        )
        return bytes(data)

    async def list(self, prefix: str) -> list[ObjectInfo]:
        def listing() -> list[ObjectInfo]:
            blobs = self._client.list_blobs(
                self._bucket, prefix=self._prefix + prefix, timeout=self._timeout, retry=self._retry
            )
            return [
                ObjectInfo(key=b.name[len(self._prefix) :], size=b.size or 0, modified=b.updated.timestamp())
                for b in blobs
            ]

        return sorted(await self._call("list", prefix, listing), key=lambda info: info.key)

    async def delete(self, key: str) -> None:
        blob = self._blob(key)
        try:
            await self._call("delete", key, lambda: blob.delete(timeout=self._timeout, retry=self._retry))
        except StoreNotFound as exc:
            if "the bucket does not exist" in str(exc):
                raise  # a missing bucket is not an object already deleted

    async def aclose(self) -> None:
        await trio.to_thread.run_sync(self._client.close)

    def _blob(self, key: str) -> storage.Blob:
        return self._bucket.blob(self._prefix + check_key(key))

    async def _call(self, operation: str, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await trio.to_thread.run_sync(fn, *args)
        except (
            api_errors.GoogleAPIError,
            auth_errors.GoogleAuthError,
            http_errors.RequestException,
            InvalidResponse,
        ) as exc:
            await trio.lowlevel.checkpoint_if_cancelled()
            raise await self._translate(operation, key, exc) from exc

    async def _translate(self, operation: str, key: str, exc: BaseException) -> StoreError:
        what = f"{self._name}: {operation} {key!r}"
        detail = str(exc).split("\n", 1)[0][:400]
        status = _status(exc)
        if status == 404:
            if not await self._bucket_exists():
                return StoreNotFound(f"{what}: the bucket does not exist ({detail})")
            return StoreNotFound(f"{what}: no such object ({detail})")
        if status in (401, 403) or isinstance(exc, auth_errors.RefreshError):
            return StoreAccessDenied(f"{what}: the store refused the credentials ({detail})")
        if "quotaExceeded" in str(exc) or "storageQuota" in str(exc):
            return StoreFull(f"{what}: no space or quota left ({detail})")
        if (status or 0) >= 500 or isinstance(exc, api_errors.RetryError | http_errors.RequestException):
            return StoreUnavailable(f"{what}: the endpoint did not answer ({detail})")
        if isinstance(exc, auth_errors.TransportError):
            return StoreUnavailable(f"{what}: the credentials' token endpoint did not answer ({detail})")
        return StoreError(f"{what}: {detail}")

    async def _bucket_exists(self) -> bool:
        try:
            return bool(await trio.to_thread.run_sync(lambda: self._bucket.exists(timeout=self._timeout)))
        except Exception:
            return True  # cannot tell: say "no such object", the narrower claim


def _status(exc: BaseException) -> int | None:
    """The HTTP status of an API error, or of a resumable upload's (another exception family)."""
    if isinstance(exc, api_errors.GoogleAPICallError):
        return exc.code
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def open_gcs(
    spec: GcsStore, credentials: StoreCredentials, *, transfer: Transfer, timeouts: tuple[float, float, float]
) -> GcsClientStore:
    """timeouts: connect, per-request read, and the retry deadline, all in seconds."""
    connect, read, deadline = timeouts
    return GcsClientStore(
        spec,
        _client(spec, credentials),
        transfer=transfer,
        timeout=(connect, read),
        retry=Retry(predicate=if_transient_error, initial=0.2, maximum=5.0, timeout=deadline),
    )


def _client(spec: GcsStore, credentials: StoreCredentials) -> storage.Client:
    options = ClientOptions(api_endpoint=spec.endpoint) if spec.endpoint else None
    if isinstance(credentials, GcsCredentials):
        info = json.loads(credentials.service_account_json)
        creds = service_account.Credentials.from_service_account_info(info)
        return storage.Client(project=info.get("project_id"), credentials=creds, client_options=options)
    if credentials is not None:
        raise ValueError(
            f"{spec.describe()}: GCS needs a service-account key, not {type(credentials).__name__}"
        )
    if spec.endpoint:
        # An emulator with no key: unauthenticated requests, never a metadata-server lookup.
        return storage.Client(project="-", credentials=AnonymousCredentials(), client_options=options)
    return storage.Client(client_options=options)  # application default credentials

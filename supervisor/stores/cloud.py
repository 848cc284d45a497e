"""S3-compatible and GCS stores through obstore (the Rust object_store crate).

obstore's *sync* API, each call in a trio worker thread, rather than its asyncio API through
supervisor.aio: obstore releases the GIL and does its I/O on its own tokio runtime, so a thread
costs nothing but itself; a streamed put feeds obstore a plain iterator whose items a worker
thread pulls from our trio iterator (trio.from_thread), where the asyncio API would need a
trio->asyncio hop (and an asyncio task) per chunk; and the stores work whether or not an asyncio
loop is open. Timeouts and retries are obstore's (StoreOptions), so a call is bounded.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import obstore
import trio
from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

from actors.errors import StoreAccessDenied, StoreError, StoreFull, StoreNotFound, StoreUnavailable
from actors.store_port import ObjectInfo, StoredObject
from supervisor.stores.keys import check_key, list_root

if TYPE_CHECKING:
    from obstore.store import ObjectStore as ObstoreBackend

READ_CHUNK = 1 << 20


@attrs.frozen
class Transfer:
    """Multipart sizing: memory held by a streamed put is about part_size * (concurrency + 1)."""

    part_size: int = 8 << 20  # S3 needs >= 5 MiB for every part but the last
    concurrency: int = 2


class Retention(Protocol):
    """Sets S3 object retention after a write (s3_retention.S3Retention): blocking calls."""

    def lock(self, key: str, version: str | None, until: float) -> None: ...

    def discard(self, key: str, version: str | None) -> None: ...


@attrs.frozen
class LockedWriters:
    """The clients of one locked store opening, and until when what they put is locked."""

    single: ObstoreBackend  # single puts: the lock headers on the PutObject itself
    multipart: ObstoreBackend  # multipart uploads: no lock headers; locked once complete
    until: float


@attrs.frozen
class ObjectLock:
    """Puts that S3 locks (object lock, COMPLIANCE mode) for `days` from the first put: obstore
    has no per-put lock option (its put attributes are content headers and user metadata), but
    its client sends any `default_headers`; so single puts go through a client made for them,
    whose headers carry the lock mode and the date. Those headers would go on every request of a
    multipart upload too, and S3's API takes them on CreateMultipartUpload but not on UploadPart
    or CompleteMultipartUpload: a multipart upload goes through a client without them, and
    `retention` then locks the version it made (PutObjectRetention), with the same mode and date.
    `writer` makes a client from the headers. Reads, listings and deletes keep the plain client.
    A store is opened for one backup: all its objects (snapshot, metadata) share one date, which
    the metadata records and retention reads."""

    days: int
    writer: Callable[[dict[str, str]], ObstoreBackend]
    retention: Retention
    clock: Callable[[], float] = time.time

    def writers(self) -> LockedWriters:
        until = int(self.clock()) + self.days * 86400
        stamp = datetime.fromtimestamp(until, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        headers = {
            "x-amz-object-lock-mode": "COMPLIANCE",
            "x-amz-object-lock-retain-until-date": stamp,
            # S3 refuses a locked put without a checksum; the client computes a sha256 one
            # (the writer's checksum_algorithm), and SDKs announce it so.
            "x-amz-sdk-checksum-algorithm": "SHA256",
        }
        # The multipart client's checksum: x-amz-checksum-algorithm on CreateMultipartUpload
        # and x-amz-checksum-sha256 on each part (obstore adds them), as S3 wants on a bucket
        # whose default retention locks new objects.
        return LockedWriters(self.writer(headers), self.writer({}), float(until))


class ObstoreStore:
    """ObjectStore on an obstore S3Store, GCSStore or AzureStore (the key prefix is obstore's);
    `lock`: every put is locked (S3 object lock)."""

    def __init__(
        self, backend: ObstoreBackend, *, name: str, transfer: Transfer, lock: ObjectLock | None = None
    ) -> None:
        self._backend = backend
        self._name = name
        self._transfer = transfer
        self._lock = lock
        self._locked: LockedWriters | None = None  # the lock's clients, once made

    def describe(self) -> str:
        return self._name

    async def put_stream(self, key: str, chunks: AsyncIterable[bytes]) -> StoredObject:
        check_key(key)
        source = aiter(chunks)
        head = await _read_up_to(source, self._transfer.part_size)
        if head.ended:
            # One request: small objects (metadata) and empty streams, which S3 multipart refuses.
            return await self.put_bytes(key, b"".join(head.chunks))
        digest = hashlib.sha256()
        sizes = [0]
        source_failed: list[BaseException] = []

        def hashed() -> Iterator[bytes]:
            try:
                for chunk in pull_from_trio(head.chunks, source):
                    digest.update(chunk)
                    sizes[0] += len(chunk)
                    yield chunk
            except BaseException as exc:
                source_failed.append(exc)
                raise

        locked = self._writers()
        backend = locked.multipart if locked else self._backend
        try:
            result = await self._call("put", key, self._put, backend, key, hashed(), True)
        except StoreError:
            if source_failed:
                # obstore reports its input's failure as its own: the snapshot's error is the news.
                raise source_failed[0] from None
            raise
        until = None
        if locked is not None:
            until = locked.until
            await self._lock_after(key, result.get("version"), until)
        return StoredObject(key=key, size=sizes[0], sha256=digest.hexdigest(), retain_until=until)

    async def put_bytes(self, key: str, data: bytes) -> StoredObject:
        check_key(key)
        locked = self._writers()
        backend, until = (locked.single, locked.until) if locked else (self._backend, None)
        await self._call("put", key, self._put, backend, key, data, False)
        sha256 = hashlib.sha256(data).hexdigest()
        return StoredObject(key=key, size=len(data), sha256=sha256, retain_until=until)

    async def get_stream(self, key: str) -> AsyncIterator[bytes]:
        check_key(key)
        result = await self._call("get", key, obstore.get, self._backend, key)
        stream = result.stream(min_chunk_size=READ_CHUNK)
        while chunk := await self._call("get", key, next, stream, b""):
            yield bytes(chunk)

    async def get_bytes(self, key: str) -> bytes:
        check_key(key)
        result = await self._call("get", key, obstore.get, self._backend, key)
        return bytes(await self._call("get", key, result.bytes))

    async def list(self, prefix: str) -> list[ObjectInfo]:
        metas = await self._call("list", prefix, _list_under, self._backend, list_root(prefix))
        return sorted(
            (
                ObjectInfo(key=m["path"], size=m["size"], modified=m["last_modified"].timestamp())
                for m in metas
                if m["path"].startswith(prefix)
            ),
            key=lambda info: info.key,
        )

    async def delete(self, key: str) -> None:
        check_key(key)
        try:
            await self._call("delete", key, obstore.delete, self._backend, key)
        except StoreNotFound as exc:
            if _names_bucket(str(exc)):
                raise  # a missing bucket is not an object already deleted

    async def aclose(self) -> None:
        pass  # obstore pools connections per store object; dropping it closes them

    def _writers(self) -> LockedWriters | None:
        if self._lock is not None and self._locked is None:
            self._locked = self._lock.writers()
        return self._locked

    async def _lock_after(self, key: str, version: str | None, until: float) -> None:
        """Lock what a multipart upload made; if that fails, delete it (unlocked, it can be) and
        fail the put: a backup is never reported with an unlocked snapshot."""
        assert self._lock is not None
        retention = self._lock.retention
        # Shielded: the upload is complete, so a backup cancelled now still locks (or deletes)
        # it. Each call is bounded by the store's timeouts and retries, and a thread call that
        # has begun is waited for even unshielded.
        with trio.CancelScope(shield=True):
            try:
                await trio.to_thread.run_sync(retention.lock, key, version, until)
            except StoreError as failed:
                try:
                    await trio.to_thread.run_sync(retention.discard, key, version)
                    left = "the unlocked upload was deleted"
                except StoreError as exc:
                    left = f"the unlocked upload is left, without metadata (deleting it failed: {exc})"
                raise type(failed)(f"{failed}; {left}") from failed

    def _put(self, backend: ObstoreBackend, key: str, data: Any, multipart: bool) -> Any:
        return obstore.put(
            backend,
            key,
            data,
            use_multipart=multipart,
            chunk_size=self._transfer.part_size,
            max_concurrency=self._transfer.concurrency,
        )

    async def _call(self, operation: str, key: str, fn: Any, *args: Any) -> Any:
        try:
            return await trio.to_thread.run_sync(fn, *args)
        except (obstore.exceptions.BaseError, OSError) as exc:
            # A put cancelled while obstore pulled chunks fails inside obstore: stay cancelled.
            await trio.lowlevel.checkpoint_if_cancelled()
            raise _translate(self._name, operation, key, exc) from exc


def _list_under(backend: ObstoreBackend, root: str) -> list[Any]:
    return [meta for batch in obstore.list(backend, prefix=root or None) for meta in batch]


@attrs.define
class _Head:
    chunks: list[bytes]
    ended: bool


async def _read_up_to(source: AsyncIterator[bytes], limit: int) -> _Head:
    """The first chunks of a stream, up to `limit` bytes or its end, whichever comes first."""
    head = _Head(chunks=[], ended=False)
    size = 0
    while size <= limit:
        try:
            chunk = await anext(source)
        except StopAsyncIteration:
            head.ended = True
            break
        head.chunks.append(chunk)
        size += len(chunk)
    return head


def pull_from_trio(head: list[bytes], source: AsyncIterator[bytes]) -> Iterator[bytes]:
    """A blocking iterator for obstore's worker thread over a trio async iterator.

    Each item is fetched by trio.from_thread, in the putting task's context: a cancelled put
    raises there, obstore aborts the multipart upload, and nothing half-written stays visible.
    """
    yield from head
    while True:
        try:
            yield trio.from_thread.run(_next, source)
        except StopAsyncIteration:
            return


async def _next(source: AsyncIterator[bytes]) -> bytes:
    return await anext(source)


# --- errors: obstore's exception class first, then the HTTP status and S3/GCS error code --------

_STATUS = re.compile(r"status code: (\d{3})")
# "Bucket is missing Object Lock Configuration" (S3; moto writes ObjectLockConfiguration).
_NO_LOCK = re.compile(r"missing Object ?Lock ?Configuration")
# What a backup says when its bucket cannot lock, here and in s3_retention.py.
NO_OBJECT_LOCK = "the bucket has no object lock: create it with object lock enabled (spec.backup.immutable)"
_S3_CODE = re.compile(r"<Code>(\w+)</Code>")
_FULL_CODES = ("QuotaExceeded", "quotaExceeded", "InsufficientStorage", "EntityTooLarge", "storageQuota")
_UNAVAILABLE_TEXT = ("error sending request", "timed out", "timeout", "Connection refused", "connect")


def _names_bucket(message: str) -> bool:
    # S3 and GCS name a missing bucket so; Azure a missing container ContainerNotFound.
    return (
        any(code in message for code in ("NoSuchBucket", "ContainerNotFound"))
        or "bucket does not exist" in message.lower()
    )


def _translate(store: str, operation: str, key: str, exc: BaseException) -> StoreError:
    detail = str(exc).split("\n", 1)[0][:300]
    if error_code := _S3_CODE.search(str(exc)):
        detail = f"{error_code.group(1)}: {detail}"  # S3's own name for it, on a later line
    what = f"{store}: {operation} {key!r}"
    status = _STATUS.search(str(exc))
    code = int(status.group(1)) if status else None
    if _names_bucket(str(exc)):
        return StoreNotFound(f"{what}: the bucket does not exist ({detail})")
    if isinstance(exc, FileNotFoundError) or code == 404:
        return StoreNotFound(f"{what}: no such object ({detail})")
    if _NO_LOCK.search(str(exc)):  # S3's InvalidRequest for a lock the bucket cannot keep
        return StoreError(f"{what}: {NO_OBJECT_LOCK} ({detail})")
    if isinstance(exc, PermissionDeniedError | UnauthenticatedError) or code in (401, 403):
        return StoreAccessDenied(f"{what}: the store refused the credentials ({detail})")
    if code == 507 or any(c in str(exc) for c in _FULL_CODES):
        return StoreFull(f"{what}: no space or quota left ({detail})")
    if code is not None and code < 500:
        # The store answered and refused: obstore's text names its retry settings
        # ("retry_timeout"), which must not read as a timeout.
        return StoreError(f"{what}: {detail}")
    if (code is not None and code >= 500) or any(t in str(exc) for t in _UNAVAILABLE_TEXT):
        return StoreUnavailable(f"{what}: the endpoint did not answer ({detail})")
    return StoreError(f"{what}: {detail}")

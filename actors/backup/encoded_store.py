"""A store that compresses and encrypts backup objects on the way in, and decrypts and
decompresses them on the way out (the format: actors/backup/envelope.py).

Everything that writes or reads a backup (the backup job and its verification, the delta
follower, point-in-time plans, both restorers) goes through one of these, so none of them
knows about keys. Snapshots and delta chunks are encoded; metadata objects stay plain JSON.
Reading tells the form from the object's first bytes: old plain objects read as before, and a
key is looked for only when an object is encrypted. The CPU work runs in worker threads, one
segment at a time, so the event loop keeps serving and memory stays at a few segments.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import attrs
import trio
from attrs import frozen

from actors.backup.envelope import HEADER_SIZE, SEGMENT, Decoder, Encoder, decode, is_envelope, parse_header
from actors.backup.keys import KeyRing, no_keys
from actors.backup.ports import BackupKeySource
from actors.backup.source import is_metadata
from actors.errors import BackupEncodingError, BackupKeyMissing
from actors.model import BackupSpec, ClusterRef, Compression
from actors.store_port import ObjectInfo, ObjectStore, StoredObject
from supervisor.runtime import leaf_exceptions

T = TypeVar("T")

# Encoded pieces (a segment or so each) between the encoder and the store.
ENCODED_AHEAD = 2


@frozen
class Encoding:
    """How new objects are written: compressed or not, encrypted with the current key of
    `key_secret` or not (None). Reading needs only the keys."""

    compression: Compression = Compression.ZSTD
    key_secret: str | None = None

    @property
    def plain(self) -> bool:
        return self.compression is Compression.NONE and self.key_secret is None


def encoding_of(spec: BackupSpec | None) -> Encoding:
    if spec is None:
        return Encoding()
    secret = spec.encryption.key_secret if spec.encryption else None
    return Encoding(spec.compression, secret)


class EncodedStore:
    """actors.store_port.ObjectStore over another one. `keys` reads the key ring (at most once
    per store: a store is opened for one backup or restore, so a rotated key is used by the
    next one)."""

    def __init__(
        self, inner: ObjectStore, encoding: Encoding, keys: Callable[[], Awaitable[KeyRing]]
    ) -> None:
        self.inner = inner
        self._encoding = encoding
        self._keys = keys
        self._ring: KeyRing | None = None

    async def ring(self) -> KeyRing:
        if self._ring is None:
            self._ring = await self._keys()
        return self._ring

    async def _encoder(self) -> Encoder:
        key = (await self.ring()).current() if self._encoding.key_secret else None
        return Encoder(compress=self._encoding.compression is Compression.ZSTD, key=key)

    def _described(self, stored: StoredObject, encoder: Encoder) -> StoredObject:
        return attrs.evolve(
            stored,
            content_size=encoder.size,
            content_sha256=encoder.sha256,
            compression=self._encoding.compression.value,
            key_id=encoder.key_id,
        )

    async def put_stream(self, key: str, chunks: AsyncIterable[bytes]) -> StoredObject:
        if self._encoding.plain or is_metadata(key):
            return await self.inner.put_stream(key, chunks)
        encoder = await self._encoder()  # a missing key fails the backup before any byte is read
        # Encoding runs a segment ahead of the store: one compresses in a worker thread while
        # the store writes (or uploads) the one before.
        send, receive = trio.open_memory_channel[bytes | None](ENCODED_AHEAD)

        async def encode() -> None:
            async with send:
                async with _closing(_batched(chunks, SEGMENT)) as batches:
                    async for batch in batches:
                        if out := await trio.to_thread.run_sync(encoder.feed, batch):
                            await send.send(out)
                await send.send(await trio.to_thread.run_sync(encoder.finish))
                await send.send(None)  # complete: anything else ends the object as failed

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(encode)
                stored = await self.inner.put_stream(key, _until_complete(receive, key))
        except BaseExceptionGroup as group:
            raise _first(group) from None
        return self._described(stored, encoder)

    async def put_bytes(self, key: str, data: bytes) -> StoredObject:
        if self._encoding.plain or is_metadata(key):
            return await self.inner.put_bytes(key, data)
        encoder = await self._encoder()
        out = await trio.to_thread.run_sync(encoder.finish, data)
        return self._described(await self.inner.put_bytes(key, out), encoder)

    async def get_stream(self, key: str) -> AsyncIterator[bytes]:
        # A segment out at a time: 1 MiB stored may hold far more once decompressed.
        async with _closing(self.get_batches(key, SEGMENT)) as batches:
            async for batch in batches:
                for chunk in batch:
                    yield chunk

    async def get_batches(self, key: str, limit: int) -> AsyncIterator[list[bytes]]:
        """get_stream's chunks, as lists of up to `limit` bytes decoded in one worker thread
        (non-empty chunks; for a plain object, one list per chunk the store sends): fewer
        hand-overs for a reader that passes them to a thread of its own (a restore's fetch)."""
        async with _closing(self.inner.get_stream(key)) as source:
            head = bytearray()
            async for chunk in source:  # enough to tell the form (a store may send a few bytes first)
                head += chunk
                if len(head) >= HEADER_SIZE:
                    break
            if not is_envelope(head):  # a plain object: passed through as it comes
                if head:
                    yield [bytes(head)]
                async for chunk in source:
                    yield [chunk]
                return
            decoder = await self._decoder(bytes(head), key)
            decoder.push(head)
            async with _closing(_batched(source, SEGMENT)) as batches:
                async for batch in batches:
                    decoder.push(batch)
                    while decoder.ready:
                        if out := await trio.to_thread.run_sync(_nonempty, decoder, limit):
                            yield out
            while decoder.ready:  # what the first read held alone (a small object)
                if out := await trio.to_thread.run_sync(_nonempty, decoder, limit):
                    yield out
            decoder.finish()

    async def _decoder(self, head: bytes, key: str) -> Decoder:
        header = parse_header(head, key)
        return Decoder(header, await self._ring_for(key) if header.encrypted else no_keys(""), key)

    async def _ring_for(self, key: str) -> KeyRing:
        if self._encoding.key_secret is None:
            raise BackupKeyMissing(
                f"{key} is encrypted, and spec.backup.encryption names no keySecret to decrypt it with"
            )
        return await self.ring()

    async def get_bytes(self, key: str) -> bytes:
        data = await self.inner.get_bytes(key)
        if not is_envelope(data):
            return data
        header = parse_header(data, key)
        ring = await self._ring_for(key) if header.encrypted else no_keys("")
        return await trio.to_thread.run_sync(decode, data, ring, key)

    async def list(self, prefix: str) -> list[ObjectInfo]:
        return await self.inner.list(prefix)

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _nonempty(decoder: Decoder, limit: int) -> list[bytes]:
    return [segment for segment in decoder.take_segments(limit) if segment]


@asynccontextmanager
async def _closing(chunks: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """`chunks` closed when done with (an async generator left early would hold its store's
    connection or file until collected)."""
    try:
        yield chunks
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()


async def _batched(chunks: AsyncIterable[bytes], size: int) -> AsyncIterator[bytes]:
    """The chunks joined into pieces of at least `size` bytes (the last may be shorter), so a
    worker thread is asked once per segment, not once per network read. A chunk that is that
    large already (a snapshot's pieces are) is passed on as it is, not copied."""
    pending = bytearray()
    async for chunk in chunks:
        if not pending and len(chunk) >= size:
            yield chunk
            continue
        pending += chunk
        if len(pending) >= size:
            yield bytes(pending)
            pending.clear()
    if pending:
        yield bytes(pending)


async def _until_complete(receive: trio.MemoryReceiveChannel[bytes | None], key: str) -> AsyncIterator[bytes]:
    """The encoded pieces for the store; raises, so the store keeps no object, when the
    encoding ended without its last piece (the snapshot or the encoder failed)."""
    async with receive:
        async for piece in receive:
            if piece is None:
                return
            yield piece
    raise _Incomplete(f"{key}: encoding stopped before the end of the object")


class _Incomplete(BackupEncodingError):
    """The store's side of a failed encoding: the encoder's own error is the news."""


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error that ended a put: the source's, the encoder's or the store's, not the
    other side's broken channel or our own stop."""
    leaves = [e for e in leaf_exceptions(group) if not isinstance(e, trio.Cancelled)]
    firsts = [e for e in leaves if not isinstance(e, _Incomplete | trio.BrokenResourceError)]
    return (firsts or leaves or [group])[0]


def encoded(
    store: ObjectStore, cluster: ClusterRef, spec: BackupSpec | None, keys: BackupKeySource | None
) -> EncodedStore:
    """`store` writing as `spec` (spec.backup) says, with the keys of its keySecret from `keys`
    (None: this mode has no way to read keys, which is an error only for an encrypted object)."""
    encoding = encoding_of(spec)

    async def ring() -> KeyRing:
        secret = encoding.key_secret
        if secret is None:
            return no_keys("no spec.backup.encryption")
        if keys is None:
            raise BackupKeyMissing(f"keySecret {secret!r}: this daemon has no way to read backup keys")
        return await keys.key_ring(cluster, secret)

    return EncodedStore(store, encoding, ring)


def unencoded(store: ObjectStore) -> ObjectStore:
    """The store under an EncodedStore (for a restorer that reads a plain object in place)."""
    return store.inner if isinstance(store, EncodedStore) else store

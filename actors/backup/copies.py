"""The second site (spec.backup.copyTo): every complete backup in the first store is copied, as
stored (compressed and encrypted alike: no key is needed to copy), to the second, and verified
there by reading the copy back and hashing it against the sha256 its metadata recorded.

A pass copies whatever the second store lacks, not only the newest backup: a second site that
was down catches up on its own once it answers again. Delta chunks are copied the same way
(sync_chunks, after each chunk the follower writes), so a restore to a revision can read the
second store alone; a chunk has no metadata, so the sha256 checked is the one of the bytes read
from the first store.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable

from attrs import frozen

from actors.backup.deltas import deltas_prefix, parse_chunk_key
from actors.backup.source import metadata_key, snapshot_of
from actors.errors import StoreError
from actors.model import ClusterRef
from actors.store_port import ObjectStore


class CopyFailed(StoreError):
    """The copy in the second store is not the backup: its bytes hash to something else, or its
    metadata is not what was written."""


@frozen
class Copied:
    key: str
    sha256: str


async def sync_copies(source: ObjectStore, target: ObjectStore, cluster: ClusterRef) -> list[Copied]:
    """Copy the cluster's complete backups (a snapshot and its metadata) that `target` lacks,
    oldest first; both stores as they hold bytes (never an EncodedStore). StoreError (CopyFailed
    among them) at the first that fails, naming it."""
    folder = f"{cluster.namespace}/{cluster.name}/"
    there = {o.key for o in await target.list(folder)}
    here = {o.key for o in await source.list(folder)}
    missing = sorted(
        k for k in here
        if snapshot_of(k, cluster) and metadata_key(k) in here and metadata_key(k) not in there
    )  # fmt: skip
    return [await copy_backup(source, target, key) for key in missing]


async def sync_chunks(source: ObjectStore, target: ObjectStore, cluster: ClusterRef) -> list[Copied]:
    """Copy the cluster's delta chunks that `target` lacks, oldest first (both stores as they
    hold bytes); StoreError (CopyFailed among them) at the first that fails, naming it."""
    prefix = deltas_prefix(cluster)
    there = {o.key for o in await target.list(prefix)}
    here = [o.key for o in await source.list(prefix) if parse_chunk_key(o.key)]
    missing = sorted(k for k in here if k not in there)
    return [await copy_chunk(source, target, key) for key in missing]


async def copy_chunk(source: ObjectStore, target: ObjectStore, key: str) -> Copied:
    """One delta chunk, checked against the sha256 of the bytes read from the first store. A
    chunk is complete by its presence alone (no metadata marks it), so a copy that does not
    verify is deleted: the next pass, seeing it missing, copies it again."""
    read = hashlib.sha256()

    async def hashed() -> AsyncIterator[bytes]:
        async for chunk in source.get_stream(key):
            read.update(chunk)
            yield chunk

    try:
        copied, _ = await _put_verified(target, key, hashed(), read.hexdigest)
    except CopyFailed:
        await target.delete(key)
        raise
    return copied


async def copy_backup(source: ObjectStore, target: ObjectStore, key: str) -> Copied:
    """One backup: the snapshot first, checked; its metadata last (a backup without metadata is
    incomplete to retention and restores, so an interrupted copy is never taken for one)."""
    meta = json.loads(await source.get_bytes(metadata_key(key)))
    expected = str(meta.get("sha256") or "")
    copied, retain_until = await _put_verified(target, key, source.get_stream(key), lambda: expected)
    # The copy's own lock date (its store locked it at its own put), for its own retention.
    meta["retainUntil"] = retain_until
    written = json.dumps(meta).encode()
    await target.put_bytes(metadata_key(key), written)
    if await target.get_bytes(metadata_key(key)) != written:
        raise CopyFailed(f"{metadata_key(key)}: the copy's metadata reads back changed")
    return copied


async def _put_verified(
    target: ObjectStore, key: str, data: AsyncIterator[bytes], expected: Callable[[], str]
) -> tuple[Copied, float | None]:
    """Put `data` under `key`, then read it back: both must hash to `expected()` (asked once
    the data is all given: a chunk's hash is known only then). The copy and its lock date."""
    stored = await target.put_stream(key, data)
    want = expected()
    if stored.sha256 != want:
        raise CopyFailed(f"{key}: the second store was given bytes hashing to {stored.sha256}, not {want}")
    read_back = hashlib.sha256()
    async for chunk in target.get_stream(key):
        read_back.update(chunk)
    if read_back.hexdigest() != want:
        raise CopyFailed(f"{key}: the copy reads back as sha256 {read_back.hexdigest()}, not {want}")
    return Copied(key, want), stored.retain_until

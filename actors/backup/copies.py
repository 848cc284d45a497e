"""The second site (spec.backup.copyTo): every complete backup in the first store is copied, as
stored (compressed and encrypted alike: no key is needed to copy), to the second, and verified
there by reading the copy back and hashing it against the sha256 its metadata recorded.

A pass copies whatever the second store lacks, not only the newest backup: a second site that
was down catches up on its own once it answers again. Delta chunks are not copied (a restore to
a revision reads them from the first store only).
"""

from __future__ import annotations

import hashlib
import json

from attrs import frozen

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


async def copy_backup(source: ObjectStore, target: ObjectStore, key: str) -> Copied:
    """One backup: the snapshot first, checked; its metadata last (a backup without metadata is
    incomplete to retention and restores, so an interrupted copy is never taken for one)."""
    meta = json.loads(await source.get_bytes(metadata_key(key)))
    expected = str(meta.get("sha256") or "")
    stored = await target.put_stream(key, source.get_stream(key))
    if stored.sha256 != expected:
        raise CopyFailed(
            f"{key}: the second store was given bytes hashing to {stored.sha256}, not {expected}"
        )
    read_back = hashlib.sha256()
    async for chunk in target.get_stream(key):
        read_back.update(chunk)
    if read_back.hexdigest() != expected:
        raise CopyFailed(f"{key}: the copy reads back as sha256 {read_back.hexdigest()}, not {expected}")
    # The copy's own lock date (its store locked it at its own put), for its own retention.
    meta["retainUntil"] = stored.retain_until
    written = json.dumps(meta).encode()
    await target.put_bytes(metadata_key(key), written)
    if await target.get_bytes(metadata_key(key)) != written:
        raise CopyFailed(f"{metadata_key(key)}: the copy's metadata reads back changed")
    return Copied(key, expected)

"""What every SeedRestorer (local, Kubernetes) checks of the backup it restores from."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from actors.backup.ports import Restored
from actors.backup.source import metadata_key
from actors.errors import RestoreFailed, StoreError, StoreNotFound
from actors.model import StoreSpec
from actors.store_port import ObjectStore


async def check_against_metadata(store: ObjectStore, key: str, sha256: str) -> dict[str, object]:
    """The backup's metadata object (the JSON beside each snapshot: job.describe; {} when there
    is none), once the snapshot read (`sha256`) is the one it describes; RestoreFailed if not."""
    try:
        meta = json.loads(await store.get_bytes(metadata_key(key)))
    except (StoreNotFound, ValueError):
        return {}  # not one of our backups (no metadata): etcdutl's own checksum still applies
    if not isinstance(meta, dict):
        return {}
    if meta.get("sha256") and meta["sha256"] != sha256:
        raise RestoreFailed(
            f"backup {key} is corrupt: sha256 {sha256} where its metadata says {meta['sha256']}"
        )
    return meta


def restored(key: str, size: int, sha256: str, meta: dict[str, object]) -> Restored:
    """What a seed was restored from, with the revision and HashKV its metadata recorded (the
    restored seed is checked against them)."""
    kv_hash, revision = meta.get("hashKV"), meta.get("revision")
    if not isinstance(kv_hash, int) or not isinstance(revision, int):
        return Restored(key, size, sha256)
    return Restored(key, size, sha256, revision, kv_hash)


@contextmanager
def store_errors_fail_the_restore(store: StoreSpec, key: str) -> Iterator[None]:
    """A store's error while reading the backup, as the RestoreFailed that fails the cluster."""
    try:
        yield
    except StoreNotFound as exc:
        raise RestoreFailed(f"backup {key} not found in {store.describe()}: {exc}") from exc
    except StoreError as exc:
        raise RestoreFailed(f"backup {key} could not be read: {exc}") from exc

"""What every SeedRestorer (local, Kubernetes) checks of the backup it restores from."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import attrs

from actors.backup.ports import BackupResolver, Restored
from actors.backup.source import metadata_key
from actors.errors import RestoreFailed, StoreError, StoreNotFound
from actors.model import ClusterRef, RestoreSpec, StoreSpec
from actors.store_port import ObjectStore


async def resolve_source(
    source: RestoreSpec, cluster: ClusterRef, resolver: BackupResolver | None, *, where: str
) -> tuple[StoreSpec, str, RestoreSpec]:
    """The store and key to restore from: spec.restore's own, or its backupName's (in the
    cluster's namespace), keeping the asked revision; RestoreFailed when neither can be told.
    `where` names what runs the restore, for the error when backupName is not set up there."""
    if source.backup_name is not None:
        if resolver is None:
            raise RestoreFailed(f"restoring from an EtcdBackup is not set up in this {where}")
        resolved = await resolver.resolve(cluster.namespace, source.backup_name)
        source = attrs.evolve(resolved, revision=source.revision)
    if source.store is None or source.key is None:
        raise RestoreFailed("spec.restore names no store and key")
    return source.store, source.key, source


async def check_against_metadata(store: ObjectStore, key: str, sha256: str) -> dict[str, object]:
    """The backup's metadata object (the JSON beside each snapshot: job.describe; {} when there
    is none), once the snapshot read (`sha256`, of the bytes once decrypted and decompressed)
    is the one it describes; RestoreFailed if not."""
    try:
        meta = json.loads(await store.get_bytes(metadata_key(key)))
    except (StoreNotFound, ValueError):
        return {}  # not one of our backups (no metadata): etcdutl's own checksum still applies
    if not isinstance(meta, dict):
        return {}
    recorded = _recorded(meta)
    if recorded and recorded != sha256:
        raise RestoreFailed(f"backup {key} is corrupt: sha256 {sha256} where its metadata says {recorded}")
    return meta


def _recorded(meta: dict[str, object]) -> object:
    # The snapshot's own sha256 (what is read back once decoded); older metadata has only
    # "sha256", which for a plain object is the same.
    return meta.get("snapshotSha256") or meta.get("sha256")


def sha256_checked(meta: dict[str, object]) -> bool:
    """Whether check_against_metadata compared the snapshot read with a sha256 its metadata
    recorded. The backup job recorded it from a snapshot whose trailing checksum the etcd client
    had verified, so bytes that passed need no second pass of etcdutl's own check."""
    recorded = _recorded(meta)
    return isinstance(recorded, str) and recorded != ""


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

"""Backups in local mode: stores opened with the daemon's credentials, verification on loopback.

Relative store paths and credential files resolve against the manifest's directory, so a
manifest means the same thing wherever the daemon was started from.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from pathlib import Path

import trio

from actors.backup.actor import RETRY, WAKE_EVERY
from actors.backup.deltas import Change
from actors.backup.keys import KeyRing, key_ring_from
from actors.backup.ports import BackupRequests, SnapshotVerifier
from actors.backup.records import KvHash
from actors.backup.services import BackupTiming, StoreOpener, VerifierFactory, backup_service
from actors.cluster_context import ChildFactory
from actors.errors import BackupKeyMissing
from actors.model import ClusterRef, StoreSpec
from actors.store_port import ObjectStore
from supervisor.backoff import Backoff
from supervisor.local.runtime import LocalRuntime
from supervisor.local.scratch import ScratchVerifier
from supervisor.stores.credentials import local_credentials, parse_key_values
from supervisor.stores.factory import open_store

log = logging.getLogger(__name__)


def local_store_opener(manifest_dir: Path, environ: Mapping[str, str]) -> Callable[[StoreSpec], ObjectStore]:
    """Stores opened to read (restores): nothing they write is locked."""
    return lambda spec: _open_local(spec, manifest_dir, environ)


def _open_local(
    spec: StoreSpec, manifest_dir: Path, environ: Mapping[str, str], lock_days: int | None = None
) -> ObjectStore:
    credentials = local_credentials(spec, manifest_dir, environ)
    return open_store(spec, credentials=credentials, relative_to=manifest_dir, lock_days=lock_days)


class LocalKeyFiles:
    """actors.backup.ports.BackupKeySource in local mode: spec.backup.encryption.keySecret is a
    file of that name next to the manifest, NAME=VALUE lines as for store credentials (`key`:
    the current key; other names: older ones). Read at each use: a rotated key is picked up
    by the next backup."""

    def __init__(self, manifest_dir: Path) -> None:
        self._dir = manifest_dir

    async def key_ring(self, cluster: ClusterRef, secret: str) -> KeyRing:
        path = self._dir / secret
        where = f"keySecret {secret!r} (the file {path})"
        try:
            text = await trio.to_thread.run_sync(path.read_text)
        except OSError as exc:
            raise BackupKeyMissing(f"{where}: {exc.strerror or exc}") from exc
        return key_ring_from(parse_key_values(text), where)


def local_backups(
    runtime: LocalRuntime,
    *,
    manifest_dir: Path,
    scratch_dir: Path,
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], float] = time.time,
    wake_every: float = WAKE_EVERY,
    retry: Backoff = RETRY,
    requests: BackupRequests | None = None,
) -> ChildFactory:
    """The backup actor alone, for a test or a bench that wires its own (the daemon's come
    from its Platform: supervisor/local/platform.py)."""
    timing = BackupTiming(clock=clock, wake_every=wake_every, retry=retry)
    stores = local_stores(manifest_dir, environ)
    verifiers = verifiers_or_warn(runtime, scratch_dir)
    return backup_service(stores, verifiers, requests, timing, LocalKeyFiles(manifest_dir))


def local_stores(manifest_dir: Path, environ: Mapping[str, str]) -> StoreOpener:
    """The Platform's store opener: every cluster's stores with the daemon's credentials."""

    def opener(cluster: ClusterRef, spec: StoreSpec, *, lock_days: int | None = None) -> ObjectStore:
        return _open_local(spec, manifest_dir, environ, lock_days)

    return opener


def scratch_verifiers(runtime: LocalRuntime, scratch_dir: Path) -> VerifierFactory:
    """Each cluster's backups verified in a scratch member on loopback, with the etcd of its
    version. FileNotFoundError when the default etcd has no etcdutl beside it."""
    ScratchVerifier(scratch_dir, runtime.etcd_binary)  # etcdutl is there, or say so
    return lambda cluster, spec: SpecVersionVerifier(runtime, scratch_dir, lambda: spec().version)


def verifiers_or_warn(runtime: LocalRuntime, scratch_dir: Path) -> VerifierFactory | None:
    """scratch_verifiers, or None (backups stored unverified) and a warning saying why."""
    try:
        return scratch_verifiers(runtime, scratch_dir)
    except FileNotFoundError as exc:
        log.warning("%s; backups will be stored unverified", exc, extra={"event": "backup"})
        return None


class SpecVersionVerifier:
    """SnapshotVerifier on the etcd of the cluster's spec.version when it is installed (the etcd
    that would restore the backup), else the default version's.

    The version is read at each verification: a cluster upgraded since its backup child started
    is verified with its new version (the snapshot may come from a member still on the old one,
    which the newer etcd restores as any snapshot of the previous minor).
    """

    def __init__(self, runtime: LocalRuntime, scratch_dir: Path, version: Callable[[], str]) -> None:
        self._runtime = runtime
        self._scratch_dir = scratch_dir
        self._version = version

    def binary(self) -> Path:
        return self._runtime.builds.etcd(self._version()) or self._runtime.etcd_binary

    def _verifier(self) -> SnapshotVerifier:
        return ScratchVerifier(self._scratch_dir, self.binary(), self._runtime.scratch_ports)

    async def restored_hash(self, snapshot: AsyncIterable[bytes]) -> KvHash:
        return await self._verifier().restored_hash(snapshot)

    async def replayed_hash(
        self, snapshot: AsyncIterable[bytes], changes: Sequence[Change], target: int, *, compact_to: int = 0
    ) -> KvHash:
        return await self._verifier().replayed_hash(snapshot, changes, target, compact_to=compact_to)

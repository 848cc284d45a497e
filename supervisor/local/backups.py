"""Backups in local mode: stores opened with the daemon's credentials, verification on loopback.

Relative store paths and credential files resolve against the manifest's directory, so a
manifest means the same thing wherever the daemon was started from.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from actors.backup.actor import RETRY, WAKE_EVERY, BackupPorts, backup_child
from actors.backup.ports import BackupRequests
from actors.cluster import ChildFactory
from actors.model import StoreSpec
from actors.store_port import ObjectStore
from supervisor.backoff import Backoff
from supervisor.local.runtime import LocalRuntime
from supervisor.local.scratch import ScratchVerifier
from supervisor.stores.credentials import local_credentials
from supervisor.stores.factory import open_store

log = logging.getLogger(__name__)


def local_store_opener(manifest_dir: Path, environ: Mapping[str, str]) -> Callable[[StoreSpec], ObjectStore]:
    def open_for(spec: StoreSpec) -> ObjectStore:
        credentials = local_credentials(spec, manifest_dir, environ)
        return open_store(spec, credentials=credentials, relative_to=manifest_dir)

    return open_for


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
    open_for = local_store_opener(manifest_dir, environ)
    try:
        verifier: ScratchVerifier | None = ScratchVerifier(scratch_dir, runtime.etcd_binary)
    except FileNotFoundError as exc:
        log.warning("%s; backups will be stored unverified", exc, extra={"event": "backup"})
        verifier = None
    ports = BackupPorts(open_for, verifier, clock, requests)
    return backup_child(ports, wake_every=wake_every, retry=retry)

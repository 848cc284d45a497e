"""Delta backups in local mode (spec.backup.deltaPeriod): the follower child, with the same
stores and verification as full backups, following history through each cluster's etcd admin."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from actors.backup.actor import BackupPorts
from actors.backup.delta_actor import delta_child
from actors.backup.deltas import HistorySource
from actors.cluster import ChildFactory, ClusterContext
from supervisor.etcd.admin import EtcdAdminAdapter
from supervisor.local.backups import local_store_opener
from supervisor.local.runtime import LocalRuntime
from supervisor.local.scratch import ScratchVerifier


def local_deltas(
    runtime: LocalRuntime,
    *,
    manifest_dir: Path,
    scratch_dir: Path,
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], float] = time.time,
) -> ChildFactory:
    try:
        verifier: ScratchVerifier | None = ScratchVerifier(scratch_dir, runtime.etcd_binary)
    except FileNotFoundError:
        verifier = None  # local_backups already said so
    ports = BackupPorts(local_store_opener(manifest_dir, environ), verifier, clock)
    return delta_child(ports, history_of)


def history_of(context: ClusterContext) -> HistorySource | None:
    admin = context.ports.admin
    return admin if isinstance(admin, EtcdAdminAdapter) else None

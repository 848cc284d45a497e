"""Delta backups in local mode (spec.backup.deltaPeriod): the follower child, with the same
stores and verification as full backups (the etcd of the cluster's version replays the chain in
a scratch member), following history through each cluster's etcd admin."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from actors.backup.delta_actor import delta_child
from actors.backup.delta_verify import VERIFY_EVERY
from actors.backup.deltas import HistorySource
from actors.backup.ports import BackupPorts
from actors.cluster_context import ChildFactory, ClusterContext
from supervisor.etcd.admin import EtcdAdminAdapter
from supervisor.local.backups import SpecVersionVerifier, local_store_opener
from supervisor.local.runtime import LocalRuntime
from supervisor.local.scratch import ScratchVerifier
from supervisor.runtime import ChildSpec


def local_deltas(
    runtime: LocalRuntime,
    *,
    manifest_dir: Path,
    scratch_dir: Path,
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], float] = time.time,
    verify_every: float = VERIFY_EVERY,
) -> ChildFactory:
    open_for = local_store_opener(manifest_dir, environ)
    try:
        ScratchVerifier(scratch_dir, runtime.etcd_binary)
    except FileNotFoundError:  # local_backups already said so
        return delta_child(BackupPorts(open_for, None, clock), history_of, verify_every=verify_every)

    def child(context: ClusterContext) -> ChildSpec:
        verifier = SpecVersionVerifier(runtime, scratch_dir, lambda: context.desired().resource.spec.version)
        ports = BackupPorts(open_for, verifier, clock)
        return delta_child(ports, history_of, verify_every=verify_every)(context)

    return child


def history_of(context: ClusterContext) -> HistorySource | None:
    admin = context.ports.admin
    return admin if isinstance(admin, EtcdAdminAdapter) else None

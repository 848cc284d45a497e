"""Delta backups in local mode (spec.backup.deltaPeriod): the follower child, with the same
stores and verification as full backups (the etcd of the cluster's version replays the chain in
a scratch member), following history through each cluster's etcd admin.

The daemon's follower comes from its Platform (supervisor/local/platform.py); this is the
follower alone, for a test or a bench that wires its own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from actors.backup.delta_verify import VERIFY_EVERY
from actors.backup.services import BackupTiming, VerifierFactory, delta_service
from actors.cluster_context import ChildFactory
from supervisor.local.backups import LocalKeyFiles, local_stores, scratch_verifiers
from supervisor.local.runtime import LocalRuntime


def local_deltas(
    runtime: LocalRuntime,
    *,
    manifest_dir: Path,
    scratch_dir: Path,
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], float] = time.time,
    verify_every: float = VERIFY_EVERY,
) -> ChildFactory:
    verifiers: VerifierFactory | None
    try:
        verifiers = scratch_verifiers(runtime, scratch_dir)
    except FileNotFoundError:  # local_backups already said so
        verifiers = None
    timing = BackupTiming(clock=clock, verify_every=verify_every)
    return delta_service(local_stores(manifest_dir, environ), verifiers, timing, LocalKeyFiles(manifest_dir))

"""The local mode's Platform (actors/platform.py): etcd processes on loopback, their own etcd
admin per cluster, stores with the daemon's credentials, backups verified in scratch members."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from actors.cluster_context import Timing
from actors.model import ClusterResource
from actors.platform import AdminFactory, Platform
from actors.ports import ClusterSinks, EtcdAdmin
from supervisor.etcd.admin import EtcdAdminAdapter
from supervisor.local.backup_requests import LocalBackupRequests
from supervisor.local.backups import LocalKeyFiles, local_store_opener, local_stores, verifiers_or_warn
from supervisor.local.restore import LocalRestorer
from supervisor.local.runtime import LocalRuntime


def local_platform(
    runtime: LocalRuntime,
    sinks: ClusterSinks,
    timing: Timing,
    *,
    manifest_dir: Path,
    scratch_dir: Path,
    requests: LocalBackupRequests | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Platform:
    """What `etcd-supervisor local` runs on. Relative store paths and credential files resolve
    against `manifest_dir`; backups are verified under `scratch_dir`."""
    keys = LocalKeyFiles(manifest_dir)
    return Platform(
        runtime,
        sinks,
        sinks,
        local_admins(runtime, timing),
        restorer=LocalRestorer(runtime, local_store_opener(manifest_dir, environ), requests, keys),
        stores=local_stores(manifest_dir, environ),
        keys=keys,
        verifier=verifiers_or_warn(runtime, scratch_dir),
        requests=requests,
        certificates=runtime.certificates(),
    )


def local_admins(runtime: LocalRuntime, timing: Timing) -> AdminFactory:
    """Each cluster's own etcd admin, with TLS from the cluster's client certificate when TLS is on."""

    def admin_for(resource: ClusterResource) -> EtcdAdmin:
        spec = resource.spec
        tls = runtime.client_tls_files(resource.ref, spec.certificates) if spec.tls_enabled else None
        return EtcdAdminAdapter(tls=tls, call_timeout=timing.call_timeout)

    return admin_for

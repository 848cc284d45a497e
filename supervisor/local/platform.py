"""The local mode's Platform (actors/platform.py): etcd processes on loopback, their own etcd
admin per cluster, stores with the daemon's credentials, backups verified in scratch members."""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from actors.cluster_context import Timing
from actors.errors import CertificatesRefused
from actors.model import AdoptSpec, ClusterRef, ClusterResource
from actors.platform import AdminFactory, Platform
from actors.ports import AuthFactory, ClusterSinks, EtcdAdmin
from supervisor.adopted_ca import AdoptionRefused, adopted_ca
from supervisor.etcd.admin import EtcdAdminAdapter
from supervisor.local import byo_tls
from supervisor.local.backup_requests import LocalBackupRequests
from supervisor.local.backups import LocalKeyFiles, local_store_opener, local_stores, verifiers_or_warn
from supervisor.local.etcd_auth import LocalEtcdAuth
from supervisor.local.restore import LocalRestorer
from supervisor.local.runtime import LocalRuntime

log = logging.getLogger(__name__)


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
        local_admins(runtime, timing, secrets_dir=manifest_dir),
        restorer=LocalRestorer(runtime, local_store_opener(manifest_dir, environ), requests, keys),
        stores=local_stores(manifest_dir, environ),
        keys=keys,
        verifier=verifiers_or_warn(runtime, scratch_dir),
        requests=requests,
        certificates=runtime.certificates(manifest_dir),
        auth_for=local_auth(runtime, timing, secrets_dir=manifest_dir),
    )


def local_admins(runtime: LocalRuntime, timing: Timing, *, secrets_dir: Path | None = None) -> AdminFactory:
    """Each cluster's own etcd admin, with TLS from the cluster's client certificate when TLS is on.

    `secrets_dir`: where a Secret named in a spec is a directory of files (spec.adopt's,
    secretRef's); an adopting TLS cluster's CA is the old cluster's, seeded from there before any
    is made; certificates the user brings are copied from there before the first member starts
    (then followed by the certificates child)."""

    def admin_for(resource: ClusterResource) -> EtcdAdmin:
        spec = resource.spec
        if spec.tls_enabled and spec.adopt is not None and secrets_dir is not None:
            _seed_adopted_ca(runtime, resource.ref, spec.adopt, secrets_dir)
        if spec.tls_secret and secrets_dir is not None:
            _copy_brought_tls(runtime, resource.ref, secrets_dir / spec.tls_secret)
        brought = bool(spec.tls_secret)
        tls = (
            runtime.client_tls_files(resource.ref, spec.certificates, brought=brought)
            if spec.tls_enabled
            else None
        )
        return EtcdAdminAdapter(tls=tls, call_timeout=timing.call_timeout)

    return admin_for


def local_auth(runtime: LocalRuntime, timing: Timing, *, secrets_dir: Path) -> AuthFactory:
    """Each cluster's etcd users and roles (spec.security.auth); passwords from `secrets_dir`."""
    return lambda ref: LocalEtcdAuth(runtime, ref, secrets_dir=secrets_dir, call_timeout=timing.call_timeout)


def _seed_adopted_ca(runtime: LocalRuntime, ref: ClusterRef, adopt: AdoptSpec, secrets_dir: Path) -> None:
    """Never raises: a cluster whose old CA cannot be read cannot reach the old members, and its
    status says none answers; the log says why."""
    try:
        ca = adopted_ca(_secret(secrets_dir, adopt.peer_ca_secret), _secret(secrets_dir, adopt.client_secret))
    except (AdoptionRefused, OSError) as e:
        log.error(
            "cluster %s: cannot adopt over TLS: %s (Secrets are directories under %s)", ref, e, secrets_dir
        )
        return
    runtime.seed_ca(ref, ca)


def _copy_brought_tls(runtime: LocalRuntime, ref: ClusterRef, source: Path) -> None:
    try:
        byo_tls.sync_copy(source, runtime.layout.cluster(ref).tls_dir, now=dt.datetime.now(dt.UTC))
    except CertificatesRefused as e:
        # Reported by the certificates child (CertificatesValid, an Event), which retries; the
        # members wait for a usable copy (LocalRuntime._member_tls).
        log.warning("cluster %s: %s", ref, e)


def _secret(secrets_dir: Path, name: str | None) -> dict[str, bytes]:
    """A Secret's keys and values, locally the files of the directory of that name."""
    directory = secrets_dir / name if name else None
    if directory is None or not directory.is_dir():
        return {}
    return {path.name: path.read_bytes() for path in directory.iterdir() if path.is_file()}

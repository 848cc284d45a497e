"""The operator's TLS files for one cluster, written from the cluster's <cluster>-tls Secret.

Member clients (the cluster actor's etcd client) and the snapshot pods' transfer and scratch
etcd (snapshots.py) all check against the cluster's own CA and present its client certificate.
The files live in a private directory per cluster, rewritten on each read and after each renewal
(supervisor/kube/certificates.py), each by a rename: the etcd client's SSL context follows the
certificate file (supervisor/etcd/tls.py), and a renewal keeps the key, so a reader never sees
a pair that does not match.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from actors.errors import EtcdUnavailable
from actors.model import ClusterRef
from supervisor.etcd.tls import TlsFiles
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient

# ClusterRef -> that cluster's files; EtcdUnavailable while its Secret does not exist yet.
TlsFilesFor = Callable[[ClusterRef], Awaitable[TlsFiles]]


async def write_client_tls(client: KubeClient, ref: ClusterRef, files_dir: Path) -> TlsFiles:
    path = m.core_path(ref.namespace, "secrets", m.tls_secret_name(ref))
    secret = await client.get_or_none(path)
    if secret is None:
        raise EtcdUnavailable(f"TLS Secret {ref.namespace}/{m.tls_secret_name(ref)} not there yet")
    return write_files(files_dir, secret.get("data") or {})


def write_files(files_dir: Path, data: Mapping[str, str]) -> TlsFiles:
    """The operator's three files from a TLS Secret's data (base64, as the API returns it)."""
    # Three small files: writing them inline costs less than a thread round trip.
    files_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    paths = {}
    for key in (m.TLS_CA_CERT, m.TLS_CLIENT_CERT, m.TLS_CLIENT_KEY):
        target = files_dir / key
        content = base64.b64decode(data[key])
        if not target.exists() or target.read_bytes() != content:
            aside = files_dir / f".{key}.tmp"
            fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(content)
            os.replace(aside, target)
        paths[key] = target
    return TlsFiles(paths[m.TLS_CA_CERT], paths[m.TLS_CLIENT_CERT], paths[m.TLS_CLIENT_KEY])


def client_tls_under(client: KubeClient, root: Path) -> TlsFilesFor:
    """Each cluster's files in root/<namespace>/<name>."""
    return lambda ref: write_client_tls(client, ref, root / ref.namespace / ref.name)

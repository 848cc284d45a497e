"""The CertificateStore on Kubernetes: each TLS cluster's <cluster>-tls Secret.

Leaves: `member` (tls.crt, the one certificate every member serves and presents to its peers)
and `client` (client.crt, the operator's identity). A renewal re-signs them with the CA in the
Secret, keys kept (pki.reissue), and updates the Secret in place with the resourceVersion read
(a compare-and-swap: a concurrent edit fails the renewal, which is tried again). The kubelet
then refreshes the members' mounted volume by swapping its directory whole, and etcd reads the
pair at its next handshake; no pod restarts. The operator's own copy of the client files is
rewritten at once (supervisor/kube/secret_tls.py).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography import x509

from actors.certificates import Certificate, CertificateState
from actors.errors import CertificatesRefused
from actors.model import ClusterRef
from supervisor import pki
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError
from supervisor.kube.secret_tls import write_files

LEAVES = {"member": m.TLS_CERT, "client": m.TLS_CLIENT_CERT}


class KubeCertificates:
    def __init__(self, client: KubeClient, tls_root: Path) -> None:
        self._client = client
        self._tls_root = tls_root  # the operator's files: <root>/<namespace>/<name>

    async def read(self, cluster: ClusterRef) -> CertificateState | None:
        secret = await self._secret(cluster)
        if secret is None:
            return None
        data = secret.get("data") or {}
        try:
            ca = Certificate("ca", *pki.dates(_cert(data, m.TLS_CA_CERT)))
            leaves = tuple(Certificate(name, *pki.dates(_cert(data, key))) for name, key in LEAVES.items())
        except (KeyError, ValueError) as e:
            raise CertificatesRefused(f"Secret {_name(cluster)}: unreadable certificate {e}") from e
        return CertificateState(ca, leaves)

    async def renew(self, cluster: ClusterRef, names: Sequence[str], lifetime: float) -> None:
        secret = await self._secret(cluster)
        if secret is None:
            raise CertificatesRefused(f"Secret {_name(cluster)} is gone")
        data = dict(secret.get("data") or {})
        try:
            issuer = pki.KeyPair.from_pem(_pem(data, m.TLS_CA_CERT), _pem(data, m.TLS_CA_KEY))
            now = dt.datetime.now(dt.UTC)
            for name in names:
                key = LEAVES[name]
                renewed = pki.reissue(
                    issuer, _cert(data, key), now=now, lifetime=dt.timedelta(seconds=lifetime)
                )
                data[key] = base64.b64encode(pki.KeyPair(renewed, issuer.key).cert_pem()).decode()
        except (KeyError, ValueError) as e:
            raise CertificatesRefused(f"Secret {_name(cluster)}: cannot renew {', '.join(names)}: {e}") from e
        try:
            await self._client.replace(_path(cluster), {**secret, "data": data})
        except KubeError as e:
            raise CertificatesRefused(f"Secret {_name(cluster)} not updated: {e}") from e
        write_files(self._tls_root / cluster.namespace / cluster.name, data)

    async def _secret(self, cluster: ClusterRef) -> Mapping[str, Any] | None:
        try:
            return await self._client.get_or_none(_path(cluster))
        except KubeError as e:
            raise CertificatesRefused(f"Secret {_name(cluster)} not read: {e}") from e


def _path(cluster: ClusterRef) -> str:
    return m.core_path(cluster.namespace, "secrets", m.tls_secret_name(cluster))


def _name(cluster: ClusterRef) -> str:
    return f"{cluster.namespace}/{m.tls_secret_name(cluster)}"


def _pem(data: Mapping[str, str], key: str) -> bytes:
    return base64.b64decode(data[key])


def _cert(data: Mapping[str, str], key: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(_pem(data, key))

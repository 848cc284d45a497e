"""The CertificateStore on Kubernetes: each TLS cluster's <cluster>-tls Secret.

Leaves: `member` (tls.crt, the one certificate every member serves and presents to its peers)
and `client` (client.crt, the operator's identity). A renewal re-signs them with the CA in the
Secret, keys kept (pki.reissue), and updates the Secret in place with the resourceVersion read
(a compare-and-swap: a concurrent edit fails the renewal, which is tried again). The kubelet
then refreshes the members' mounted volume by swapping its directory whole, and etcd reads the
pair at its next handshake; no pod restarts. The operator's own copy of the client files is
rewritten at once (supervisor/kube/secret_tls.py).

A CA rotation's phases (actors/ca_rotation.py, supervisor/ca_material.py) are updates of the
same Secret: the new CA waits under ca-next.crt/ca-next.key between BEGIN and SWITCH, and the
rotation record is kept in the Secret's annotations. Each update is whole, so a crash between
two leaves nothing half-done; members take each phase by a rolling restart (their pods record
the digest of the material they were made with, etcd.io/trust).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from actors.certificates import CertificateState, RotationRecord
from actors.errors import CertificatesRefused
from actors.model import ClusterRef, IssuerRef
from supervisor import brought_tls, ca_material, pki
from supervisor.kube import byo_tls
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError
from supervisor.kube.secret_tls import write_files
from supervisor.material_store import MaterialStore

# Leaf name -> its key in the Secret.
LEAVES = {"member": m.TLS_CERT, "client": m.TLS_CLIENT_CERT}
# Secret keys of a CA rotation's new CA, between its BEGIN and SWITCH.
NEXT = {ca_material.NEXT_CERT: "ca-next.crt", ca_material.NEXT_KEY: "ca-next.key"}
# Where the Secret keeps the rotation record (RotationRecord), as annotations.
RECORD_ANNOTATIONS = {
    "handled_request": "etcd.io/rotate-ca-handled",
    "begun_at": "etcd.io/ca-rotation-begun-at",
    "completed_at": "etcd.io/ca-rotation-completed-at",
}


class KubeCertificates(MaterialStore):
    follows_issuers = True  # spec.security.tls.issuerRef: cert-manager's Secrets (issued_tls.py)

    def __init__(self, client: KubeClient, tls_root: Path) -> None:
        self._client = client
        self._tls_root = tls_root  # the operator's files: <root>/<namespace>/<name>

    async def read(self, cluster: ClusterRef) -> CertificateState | None:
        secret = await self._secret(cluster)
        if secret is None:
            return None
        try:
            if m.TLS_CA_KEY not in (secret.get("data") or {}):
                return brought_tls.state(byo_tls.brought_pems(secret.get("data") or {}))
            return ca_material.state(_material(secret), _record(secret))
        except (KeyError, ValueError) as e:
            raise CertificatesRefused(f"Secret {_name(cluster)}: unreadable certificate {e}") from e

    async def follow_source(self, cluster: ClusterRef, source: str | IssuerRef) -> None:
        copied = await byo_tls.sync_copy(self._client, cluster, source, now=dt.datetime.now(dt.UTC))
        if copied is not None:  # the operator's own files follow the copy just written
            write_files(self._tls_root / cluster.namespace / cluster.name, copied)

    async def write_record(self, cluster: ClusterRef, record: RotationRecord) -> None:
        await self._change(
            cluster, lambda material: material, "cannot keep the rotation record", record=record
        )

    async def _change(
        self,
        cluster: ClusterRef,
        change: Callable[[ca_material.Material], ca_material.Material],
        what: str,
        *,
        record: RotationRecord | None = None,
    ) -> None:
        """One compare-and-swap update of the Secret: a concurrent edit fails it, and the
        child tries again from a fresh read."""
        secret = await self._secret(cluster)
        if secret is None:
            raise CertificatesRefused(f"Secret {_name(cluster)} is gone")
        try:
            data = _with_material(secret.get("data") or {}, change(_material(secret)))
        except (KeyError, ValueError) as e:
            raise CertificatesRefused(f"Secret {_name(cluster)}: {what}: {e}") from e
        updated = {**secret, "data": data}
        if record is not None:
            updated["metadata"] = _with_record(secret["metadata"], record)
        try:
            await self._client.replace(_path(cluster), updated)
        except KubeError as e:
            raise CertificatesRefused(f"Secret {_name(cluster)} not updated: {e}") from e
        write_files(self._tls_root / cluster.namespace / cluster.name, data)

    async def _secret(self, cluster: ClusterRef) -> Mapping[str, Any] | None:
        try:
            return await self._client.get_or_none(_path(cluster))
        except KubeError as e:
            raise CertificatesRefused(f"Secret {_name(cluster)} not read: {e}") from e


def _material(secret: Mapping[str, Any]) -> ca_material.Material:
    data = secret.get("data") or {}
    optional = {name: _pem(data, key) if key in data else None for name, key in NEXT.items()}
    return ca_material.Material(
        bundle=_pem(data, m.TLS_CA_CERT),
        signer_key=_pem(data, m.TLS_CA_KEY),
        leaves={name: _pem(data, key) for name, key in LEAVES.items()},
        next_cert=optional[ca_material.NEXT_CERT],
        next_key=optional[ca_material.NEXT_KEY],
    )


def _with_material(data: Mapping[str, str], material: ca_material.Material) -> dict[str, str]:
    out = {k: v for k, v in data.items() if k not in NEXT.values()}
    out[m.TLS_CA_CERT] = _b64(material.bundle)
    out[m.TLS_CA_KEY] = _b64(material.signer_key)
    for name, key in LEAVES.items():
        out[key] = _b64(material.leaves[name])
    if material.next_cert is not None and material.next_key is not None:
        out[NEXT[ca_material.NEXT_CERT]] = _b64(material.next_cert)
        out[NEXT[ca_material.NEXT_KEY]] = _b64(material.next_key)
    return out


def _record(secret: Mapping[str, Any]) -> RotationRecord:
    annotations = (secret.get("metadata") or {}).get("annotations") or {}

    def number(field: str) -> float | None:
        raw = annotations.get(RECORD_ANNOTATIONS[field])
        try:
            return float(raw) if raw is not None else None
        except ValueError:
            return None

    return RotationRecord(
        handled_request=annotations.get(RECORD_ANNOTATIONS["handled_request"]),
        begun_at=number("begun_at"),
        completed_at=number("completed_at"),
    )


def _with_record(metadata: Mapping[str, Any], record: RotationRecord) -> dict[str, Any]:
    annotations = dict(metadata.get("annotations") or {})
    for field, key in RECORD_ANNOTATIONS.items():
        value = getattr(record, field)
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value if isinstance(value, str) else repr(float(value))
    return {**metadata, "annotations": annotations}


def _path(cluster: ClusterRef) -> str:
    return m.core_path(cluster.namespace, "secrets", m.tls_secret_name(cluster))


def _name(cluster: ClusterRef) -> str:
    return f"{cluster.namespace}/{m.tls_secret_name(cluster)}"


def _pem(data: Mapping[str, str], key: str) -> bytes:
    return base64.b64decode(data[key])


def _b64(pem: bytes) -> str:
    return base64.b64encode(pem).decode()


def trust_of(data: Mapping[str, str]) -> str:
    """The trust digest of a TLS Secret's data: what a pod made now trusts and presents. For
    generated material pki.trust_digest (a leaf renewal changes nothing: etcd reloads leaves);
    for a copy of the user's Secret (no CA key) brought_tls.trust: any change of theirs is
    rolled out."""
    if m.TLS_CA_KEY in data:
        return pki.trust_digest(_pem(data, m.TLS_CA_CERT), _pem(data, m.TLS_CA_KEY))
    return brought_tls.trust(byo_tls.brought_pems(data))

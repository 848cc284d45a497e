"""Certificates from cert-manager (spec.security.tls.issuerRef) on Kubernetes.

The operator makes three cert-manager Certificates in the cluster's namespace, owned by the
EtcdCluster and kept as it builds them (cluster_objects.py): `<cluster>-tls-server` (etcd's client
listener), `<cluster>-tls-peer` (the peer listener, presented to peers too: serverAuth and
clientAuth) and `<cluster>-tls-client` (the operator's identity towards etcd), each naming the
spec's issuer and writing a Secret of the same name (tls.crt, tls.key, ca.crt). The server and
peer certificates carry the names the generated member certificate has (supervisor/kube/tls.py:
the members' wildcard under the peer Service, the client Service's names, localhost, 127.0.0.1).

cert-manager issues and renews them; the operator reads the three Secrets as one set of brought
material (supervisor/brought_tls.py's files: ca.crt is the union of the Secrets' ca.crt) and from
there on follows it exactly as a user's secretRef (byo_tls.sync_copy): checked, copied into the
<cluster>-tls Secret, and a change (a renewal) rolled out one member at a time. A Certificate
whose Secret is not there (yet) is reported with its Ready condition's reason and message.

Lives: `duration` is spec.security.tls.certificates.validity (at least an hour, cert-manager's
floor), `renewBefore` its renewBefore (default a third of validity, as for generated ones).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from actors.errors import CertificatesRefused
from actors.model import CertificatesSpec, ClusterRef, IssuerRef
from supervisor import brought_tls
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError
from supervisor.kube.tls import member_dns_names

CERT_MANAGER = "cert-manager.io/v1"
# cert-manager refuses a Certificate shorter than this.
MIN_DURATION_SECONDS = 3600.0
# Which brought files each Certificate's Secret fills, and its usages.
LEAVES = {
    "server": (brought_tls.SERVER, ("server auth", "digital signature", "key encipherment")),
    "peer": (brought_tls.PEER, ("server auth", "client auth", "digital signature", "key encipherment")),
    "client": (brought_tls.CLIENT, ("client auth", "digital signature", "key encipherment")),
}
# The operator's client identity: the CN the generated client certificate has (tls.py).
CLIENT_COMMON_NAME = "etcd-supervisor"


def certificate_name(ref: ClusterRef, leaf: str) -> str:
    """The Certificate of `leaf` and the Secret cert-manager writes it to."""
    return f"{ref.name}-tls-{leaf}"


def certificates_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/{CERT_MANAGER}/namespaces/{namespace}/certificates"
    return f"{base}/{name}" if name else base


def _go_duration(seconds: float) -> str:
    return f"{int(seconds)}s"


def certificate_spec(
    ref: ClusterRef, leaf: str, issuer: IssuerRef, lives: CertificatesSpec, cluster_domain: str
) -> dict[str, Any]:
    """The spec of the Certificate of `leaf` (pure)."""
    duration = max(lives.validity_seconds, MIN_DURATION_SECONDS)
    renew_before = min(lives.renew_before_seconds, duration * 2 / 3)
    _, usages = LEAVES[leaf]
    spec: dict[str, Any] = {
        "secretName": certificate_name(ref, leaf),
        "issuerRef": {"name": issuer.name, "kind": issuer.kind, "group": issuer.group},
        "duration": _go_duration(duration),
        "renewBefore": _go_duration(renew_before),
        "usages": list(usages),
        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        "secretTemplate": {"labels": m.cluster_labels(ref)},
    }
    if leaf == "client":
        spec["commonName"] = CLIENT_COMMON_NAME
    else:
        spec["commonName"] = f"etcd-{leaf} {ref.name}"
        spec["dnsNames"] = member_dns_names(ref, cluster_domain)
        spec["ipAddresses"] = ["127.0.0.1"]
    return spec


def certificate(
    owner: m.Owner, *, leaf: str, issuer: IssuerRef, lives: CertificatesSpec, cluster_domain: str
) -> dict[str, Any]:
    ref = owner.ref
    return {
        "apiVersion": CERT_MANAGER,
        "kind": "Certificate",
        "metadata": m._metadata(owner, certificate_name(ref, leaf), m.cluster_labels(ref)),
        "spec": certificate_spec(ref, leaf, issuer, lives, cluster_domain),
    }


def assembled(secrets: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The brought files (base64, byo_tls's source keys) from the three issued Secrets' data by
    leaf; ca.crt is every CA the three name, once each, in the server's, peer's, client's order
    (pure)."""
    out: dict[str, str] = {}
    cas: list[bytes] = []
    for leaf, ((cert_key, key_key), _) in LEAVES.items():
        data = secrets[leaf]
        out[cert_key] = data.get("tls.crt", "")
        out[key_key] = data.get("tls.key", "")
        for block in _pem_blocks(base64.b64decode(data.get("ca.crt", ""))):
            if block not in cas:
                cas.append(block)
    out[brought_tls.CA_CERT] = base64.b64encode(b"".join(cas)).decode()
    return out


def _pem_blocks(pem: bytes) -> list[bytes]:
    """Each certificate of a PEM bundle, as its own PEM block."""
    end = b"-----END CERTIFICATE-----"
    return [part.strip() + b"\n" + end + b"\n" for part in pem.split(end) if b"-----BEGIN" in part]


def not_ready(certificate: Mapping[str, Any] | None) -> str:
    """What a Certificate's Ready condition says when it is not True (its reason and message),
    "" when it is Ready (pure)."""
    if certificate is None:
        return "not made yet"
    for condition in (certificate.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            if condition.get("status") == "True":
                return ""
            return f"{condition.get('reason', '')}: {condition.get('message', '')}".strip(": ")
    return "no Ready condition yet"


async def issued_data(client: KubeClient, ref: ClusterRef, issuer: IssuerRef) -> dict[str, str]:
    """The three issued Secrets as brought material (byo_tls's source keys, base64);
    CertificatesRefused naming the field, the issuer and each Certificate not issued yet."""
    secrets: dict[str, Mapping[str, str]] = {}
    waiting = []
    for leaf in LEAVES:
        name = certificate_name(ref, leaf)
        secret = await _get(client, m.core_path(ref.namespace, "secrets", name))
        data = (secret or {}).get("data") or {}
        if "tls.crt" in data and "tls.key" in data:
            secrets[leaf] = data
            continue
        cert = await _get(client, certificates_path(ref.namespace, name))
        waiting.append(f"Certificate {name} not issued ({not_ready(cert) or 'its Secret has no tls.crt'})")
    if waiting:
        missing = await _issuer_missing(client, ref, issuer)
        raise CertificatesRefused(
            f"spec.security.tls.issuerRef ({issuer.kind} {issuer.name}): {missing}{'; '.join(waiting)}"
        )
    return assembled(secrets)


async def _issuer_missing(client: KubeClient, ref: ClusterRef, issuer: IssuerRef) -> str:
    if issuer.group != "cert-manager.io":
        return ""  # an external issuer: its kind is not ours to look up
    if issuer.kind == "ClusterIssuer":
        path, where = f"/apis/{CERT_MANAGER}/clusterissuers/{issuer.name}", ""
    else:
        path, where = (
            f"/apis/{CERT_MANAGER}/namespaces/{ref.namespace}/issuers/{issuer.name}",
            f" in {ref.namespace}",
        )
    try:
        found = await client.get_or_none(path)
    except KubeError:
        return ""  # not readable: the Certificates' conditions say what cert-manager sees
    return f"no {issuer.kind} {issuer.name}{where}; " if found is None else ""


async def _get(client: KubeClient, path: str) -> Mapping[str, Any] | None:
    try:
        return await client.get_or_none(path)
    except KubeError as e:
        raise CertificatesRefused(f"spec.security.tls.issuerRef: {path} not read: {e}") from e

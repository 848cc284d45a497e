"""Certificates the user brings (spec.security.tls.secretRef) on Kubernetes.

The user's Secret holds ca.crt (one CA, or a bundle while they rotate theirs), server.crt/key
(etcd's client listener), peer.crt/key (its peer listener, also presented to peers, so it needs
both serverAuth and clientAuth) and client.crt/key (the operator's identity). The operator checks
it and copies it into the cluster's own <cluster>-tls Secret under the names everything else
reads (members mount it, the operator's client files and the snapshot pods come from it): one
place where the material in use lives, whichever its source. A copy that changes carries a new
trust digest (certificates.trust_of), so the members are restarted one at a time to take it.
Nothing is generated, renewed or rotated here: that is the user's; what expires is reported.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from actors.errors import CertificatesRefused
from actors.model import ClusterRef
from supervisor import pki
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError

PEER_CERT = "peer.crt"
PEER_KEY = "peer.key"
# The user's key -> the key of the copy.
COPIED = {
    m.TLS_CA_CERT: m.TLS_CA_CERT,
    "server.crt": m.TLS_CERT,
    "server.key": m.TLS_KEY,
    PEER_CERT: PEER_CERT,
    PEER_KEY: PEER_KEY,
    m.TLS_CLIENT_CERT: m.TLS_CLIENT_CERT,
    m.TLS_CLIENT_KEY: m.TLS_CLIENT_KEY,
}
PAIRS = (("server.crt", "server.key"), (PEER_CERT, PEER_KEY), (m.TLS_CLIENT_CERT, m.TLS_CLIENT_KEY))
# Annotation of the copy: the Secret it was copied from.
ANNOTATION_SOURCE = "etcd.io/tls-source"


def problems(data: Mapping[str, str], *, now: dt.datetime) -> list[str]:
    """What is wrong with the user's Secret data (base64 values), each naming its key."""
    missing = [key for key in COPIED if key not in data]
    if missing:
        return [f"missing {', '.join(missing)}"]
    try:
        cas = pki.load_bundle(_pem(data, m.TLS_CA_CERT))
    except ValueError as e:
        return [f"{m.TLS_CA_CERT}: not PEM certificates ({e})"]
    found = []
    for cert_key, key_key in PAIRS:
        found += _pair_problems(data, cert_key, key_key, cas, now)
    if not found and not _usages(_cert(data, PEER_CERT)) >= {"serverAuth", "clientAuth"}:
        found.append(f"{PEER_CERT}: needs both serverAuth and clientAuth (etcd presents it to its peers)")
    return found


def _pair_problems(
    data: Mapping[str, str], cert_key: str, key_key: str, cas: list[x509.Certificate], now: dt.datetime
) -> list[str]:
    try:
        cert = _cert(data, cert_key)
    except ValueError as e:
        return [f"{cert_key}: not a PEM certificate ({e})"]
    try:
        key = serialization.load_pem_private_key(_pem(data, key_key), password=None)
    except (ValueError, TypeError) as e:
        return [f"{key_key}: not a PEM private key without a password ({e})"]
    out = []
    if _spki(key.public_key()) != _spki(cert.public_key()):
        out.append(f"{key_key} is not the key of {cert_key}")
    if not any(pki.signed_by(cert, ca) for ca in cas):
        out.append(f"{cert_key} is not signed by a CA in {m.TLS_CA_CERT}")
    if cert.not_valid_after_utc <= now:
        out.append(f"{cert_key} expired at {cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}")
    return out


def copied(data: Mapping[str, str]) -> dict[str, str]:
    """The copy's data: the user's keys under the names the cluster's Secret uses."""
    return {ours: data[theirs] for theirs, ours in COPIED.items()}


async def sync_copy(
    client: KubeClient, ref: ClusterRef, source: str, *, now: dt.datetime, owner: m.Owner | None = None
) -> dict[str, str] | None:
    """Update the cluster's <cluster>-tls Secret from the user's `source` Secret (one
    compare-and-swap update), or make it when `owner` is given; the copy's data when it changed, else None.
    CertificatesRefused, naming the Secret and the key, when the source is missing or not
    usable: nothing is copied then."""
    user = await _get(client, ref, source)
    if user is None:
        raise CertificatesRefused(f"secretRef: Secret {ref.namespace}/{source} not found")
    data = user.get("data") or {}
    found = problems(data, now=now)
    if found:
        raise CertificatesRefused(f"secretRef: Secret {ref.namespace}/{source}: {'; '.join(found)}")
    wanted = copied(data)
    live = await _get(client, ref, m.tls_secret_name(ref))
    try:
        if live is None:
            if owner is None:
                return None  # made by the member's first step, which knows the owner
            secret = m.tls_secret(owner, wanted)
            secret["metadata"].setdefault("annotations", {})[ANNOTATION_SOURCE] = source
            await client.create(m.core_path(ref.namespace, "secrets"), secret)
            return wanted
        if (live.get("data") or {}) == wanted:
            return None
        await client.replace(_path(ref, m.tls_secret_name(ref)), {**live, "data": wanted})
    except KubeError as e:
        raise CertificatesRefused(f"secretRef: the copy {m.tls_secret_name(ref)} not written: {e}") from e
    return wanted


async def _get(client: KubeClient, ref: ClusterRef, name: str) -> Mapping[str, Any] | None:
    try:
        return await client.get_or_none(_path(ref, name))
    except KubeError as e:
        raise CertificatesRefused(f"Secret {ref.namespace}/{name} not read: {e}") from e


def _path(ref: ClusterRef, name: str) -> str:
    return m.core_path(ref.namespace, "secrets", name)


def _pem(data: Mapping[str, str], key: str) -> bytes:
    return base64.b64decode(data[key])


def _cert(data: Mapping[str, str], key: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(_pem(data, key))


def _usages(cert: x509.Certificate) -> set[str]:
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return {"serverAuth", "clientAuth"}  # no restriction: any use
    names = {ExtendedKeyUsageOID.SERVER_AUTH: "serverAuth", ExtendedKeyUsageOID.CLIENT_AUTH: "clientAuth"}
    return {names[u] for u in usages if u in names}


def _spki(public_key: Any) -> bytes:
    return public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )

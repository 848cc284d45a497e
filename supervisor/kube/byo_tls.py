"""Certificates the user brings (spec.security.tls.secretRef) on Kubernetes.

The user's Secret holds the files supervisor/brought_tls.py names and checks (ca.crt and the
server, peer and client pairs). The operator copies it into the cluster's own <cluster>-tls
Secret under the names everything else reads (members mount it, the operator's client files and
the snapshot pods come from it): one place where the material in use lives, whichever its
source. A copy that changes carries a new trust digest (certificates.trust_of), so the members
are restarted one at a time to take it. Nothing is generated, renewed or rotated here: that is
the user's; what expires is reported.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from typing import Any

from actors.errors import CertificatesRefused
from actors.model import ClusterRef, IssuerRef
from supervisor import brought_tls
from supervisor.kube import issued_tls
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError

PEER_CERT = brought_tls.PEER_CERT
PEER_KEY = brought_tls.PEER_KEY
# The user's key -> the key of the copy.
COPIED = {
    brought_tls.CA_CERT: m.TLS_CA_CERT,
    brought_tls.SERVER_CERT: m.TLS_CERT,
    brought_tls.SERVER_KEY: m.TLS_KEY,
    PEER_CERT: PEER_CERT,
    PEER_KEY: PEER_KEY,
    brought_tls.CLIENT_CERT: m.TLS_CLIENT_CERT,
    brought_tls.CLIENT_KEY: m.TLS_CLIENT_KEY,
}
# Annotation of the copy: the Secret it was copied from.
ANNOTATION_SOURCE = "etcd.io/tls-source"


def problems(data: Mapping[str, str], *, now: dt.datetime) -> list[str]:
    """What is wrong with the user's Secret data (base64 values), each naming its key
    (supervisor/brought_tls.py's rules)."""
    try:
        pems = {key: base64.b64decode(value) for key, value in data.items() if key in COPIED}
    except ValueError as e:
        return [f"not base64 ({e})"]
    return brought_tls.problems(pems, now=now)


def brought_pems(copy: Mapping[str, str]) -> dict[str, bytes]:
    """The copy's data (base64, the cluster's names) as the user's files (PEM, their names)."""
    return {theirs: base64.b64decode(copy[ours]) for theirs, ours in COPIED.items()}


def copied(data: Mapping[str, str]) -> dict[str, str]:
    """The copy's data: the user's keys under the names the cluster's Secret uses."""
    return {ours: data[theirs] for theirs, ours in COPIED.items()}


async def sync_copy(
    client: KubeClient,
    ref: ClusterRef,
    source: str | IssuerRef,
    *,
    now: dt.datetime,
    owner: m.Owner | None = None,
) -> dict[str, str] | None:
    """Update the cluster's <cluster>-tls Secret from the user's `source` Secret, or from the
    Secrets cert-manager issued for the cluster (issued_tls.py; `source` the issuer), in one
    compare-and-swap update, or make it when `owner` is given; the copy's data when it changed,
    else None. CertificatesRefused, naming the Secret (or issuer) and the key, when the source
    is missing or not usable: nothing is copied then."""
    if isinstance(source, IssuerRef):
        label = f"spec.security.tls.issuerRef ({source.kind} {source.name})"
        data = await issued_tls.issued_data(client, ref, source)
    else:
        label = f"secretRef: Secret {ref.namespace}/{source}"
        user = await _get(client, ref, source)
        if user is None:
            raise CertificatesRefused(f"{label} not found")
        data = user.get("data") or {}
    found = problems(data, now=now)
    if found:
        raise CertificatesRefused(f"{label}: {'; '.join(found)}")
    wanted = copied(data)
    live = await _get(client, ref, m.tls_secret_name(ref))
    try:
        if live is None:
            if owner is None:
                return None  # made by the member's first step, which knows the owner
            secret = m.tls_secret(owner, wanted)
            secret["metadata"].setdefault("annotations", {})[ANNOTATION_SOURCE] = str(source)
            await client.create(m.core_path(ref.namespace, "secrets"), secret)
            return wanted
        if (live.get("data") or {}) == wanted:
            return None
        await client.replace(_path(ref, m.tls_secret_name(ref)), {**live, "data": wanted})
    except KubeError as e:
        raise CertificatesRefused(f"{label}: the copy {m.tls_secret_name(ref)} not written: {e}") from e
    return wanted


async def _get(client: KubeClient, ref: ClusterRef, name: str) -> Mapping[str, Any] | None:
    try:
        return await client.get_or_none(_path(ref, name))
    except KubeError as e:
        raise CertificatesRefused(f"Secret {ref.namespace}/{name} not read: {e}") from e


def _path(ref: ClusterRef, name: str) -> str:
    return m.core_path(ref.namespace, "secrets", name)

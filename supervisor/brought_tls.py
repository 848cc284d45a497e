"""Certificates the user brings (spec.security.tls.secretRef): the checks and the reported state,
the same in both modes (on Kubernetes the user's Secret, supervisor/kube/byo_tls.py; locally a
directory of files next to the manifest, supervisor/local/byo_tls.py).

The material is seven PEM files by name: ca.crt (one CA, or a bundle while the user rotates
theirs), server.crt/key (etcd's client listener), peer.crt/key (its peer listener, also
presented to peers, so it needs both serverAuth and clientAuth) and client.crt/key (the
supervisor's identity). Nothing is generated, renewed or rotated: that is the user's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from actors.certificates import Certificate, CertificateState
from supervisor import pki

CA_CERT = "ca.crt"
SERVER_CERT = "server.crt"
SERVER_KEY = "server.key"
PEER_CERT = "peer.crt"
PEER_KEY = "peer.key"
CLIENT_CERT = "client.crt"
CLIENT_KEY = "client.key"
# Every file the user brings, in the order they are named.
NAMES = (CA_CERT, SERVER_CERT, SERVER_KEY, PEER_CERT, PEER_KEY, CLIENT_CERT, CLIENT_KEY)
SERVER = (SERVER_CERT, SERVER_KEY)
PEER = (PEER_CERT, PEER_KEY)
CLIENT = (CLIENT_CERT, CLIENT_KEY)
PAIRS = (SERVER, PEER, CLIENT)
# The leaves as status reports them -> their file.
LEAVES = {"server": SERVER_CERT, "peer": PEER_CERT, "client": CLIENT_CERT}


def no_signer(user: str) -> str:
    """Why a user's client certificate (spec.security.auth) cannot be made on brought material."""
    return (
        f"spec.security.auth.users[{user}].clientCertSecret: the cluster's CA key is not the"
        " supervisor's (certificates brought with secretRef): it cannot sign users' certificates"
    )


def problems(pems: Mapping[str, bytes], *, now: dt.datetime) -> list[str]:
    """What is wrong with the user's material (PEM bytes by name), each naming its file."""
    missing = [name for name in NAMES if name not in pems]
    if missing:
        return [f"missing {', '.join(missing)}"]
    try:
        cas = pki.load_bundle(pems[CA_CERT])
    except ValueError as e:
        return [f"{CA_CERT}: not PEM certificates ({e})"]
    found = []
    for cert_name, key_name in PAIRS:
        found += _pair_problems(pems, cert_name, key_name, cas, now)
    if not found and not _usages(_cert(pems, PEER_CERT)) >= {"serverAuth", "clientAuth"}:
        found.append(f"{PEER_CERT}: needs both serverAuth and clientAuth (etcd presents it to its peers)")
    return found


def trust(pems: Mapping[str, bytes]) -> str:
    """The trust digest of brought material: every certificate a member serves or trusts counts
    (the CA bundle, server.crt, peer.crt), so any change of the user's is rolled out; the
    client's is the supervisor's alone and read at each connection."""
    return pki.content_digest(pems[CA_CERT], pems[SERVER_CERT], pems[PEER_CERT])


def state(pems: Mapping[str, bytes]) -> CertificateState:
    """The material as the certificates child reports it: the CA that expires first and the
    three leaves; nothing pending, nothing recorded (rotations are the user's)."""
    cas = pki.load_bundle(pems[CA_CERT])
    first = min(cas, key=lambda c: c.not_valid_after_utc)
    return CertificateState(
        Certificate("ca", *_dates(first)),
        tuple(Certificate(leaf, *_dates(_cert(pems, name))) for leaf, name in LEAVES.items()),
        trusted=len(cas),
        trust=trust(pems),
    )


def _dates(cert: x509.Certificate) -> tuple[float, float]:
    """(notBefore, notAfter): whoever signed brought material may not backdate as pki.issue does
    (cert-manager does not), so notBefore is taken as when it was signed, never a time to come."""
    return cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()


def _pair_problems(
    pems: Mapping[str, bytes], cert_name: str, key_name: str, cas: list[x509.Certificate], now: dt.datetime
) -> list[str]:
    try:
        cert = _cert(pems, cert_name)
    except ValueError as e:
        return [f"{cert_name}: not a PEM certificate ({e})"]
    try:
        key = serialization.load_pem_private_key(pems[key_name], password=None)
    except (ValueError, TypeError) as e:
        return [f"{key_name}: not a PEM private key without a password ({e})"]
    out = []
    if _spki(key.public_key()) != _spki(cert.public_key()):
        out.append(f"{key_name} is not the key of {cert_name}")
    if not any(pki.signed_by(cert, ca) for ca in cas):
        out.append(f"{cert_name} is not signed by a CA in {CA_CERT}")
    if cert.not_valid_after_utc <= now:
        out.append(f"{cert_name} expired at {cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}")
    return out


def _cert(pems: Mapping[str, bytes], name: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pems[name])


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

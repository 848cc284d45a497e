"""Certificates for TLS clusters: one CA per cluster, a server/peer cert per member, a client cert.

Generated once and kept under the cluster's directory, so a restarted daemon (and the etcd
members it restarts) keep trusting each other. Keys are EC P-256: quick to make, accepted by etcd.
Rotation is not done here yet; leaf certificates are valid for LEAF_DAYS.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from attrs import frozen
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 825


@frozen
class TlsFiles:
    """Paths an etcd client (or etcd itself) takes: CA bundle, certificate, private key."""

    ca: Path
    cert: Path
    key: Path


def ensure_ca(tls_dir: Path, *, common_name: str) -> TlsFiles:
    """The cluster's CA (cert is also the trust bundle), created on first use."""
    ca = TlsFiles(ca=tls_dir / "ca.crt", cert=tls_dir / "ca.crt", key=tls_dir / "ca.key")
    if ca.cert.exists() and ca.key.exists():
        return ca
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_pair(ca.cert, cert, ca.key, key)
    return ca


def ensure_leaf(ca: TlsFiles, directory: Path, *, stem: str, common_name: str, server: bool) -> TlsFiles:
    """A cert signed by the CA. Member certs serve both roles: etcd presents them to clients and,
    as a client, to its peers, so they carry serverAuth and clientAuth."""
    files = TlsFiles(ca=ca.ca, cert=directory / f"{stem}.crt", key=directory / f"{stem}.key")
    if files.cert.exists() and files.key.exists():
        return files
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{ca.key}: expected an EC private key")
    key = ec.generate_private_key(ec.SECP256R1())
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if server:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    _write_pair(files.cert, builder.sign(ca_key, hashes.SHA256()), files.key, key)
    return files


def _write_pair(
    cert_path: Path, cert: x509.Certificate, key_path: Path, key: ec.EllipticCurvePrivateKey
) -> None:
    cert_path.parent.mkdir(parents=True, exist_ok=True)
    key_bytes = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    # Key first, and only readable by us; the cert's presence is what marks the pair complete.
    _write_file(key_path, key_bytes, mode=0o600)
    _write_file(cert_path, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)


def _write_file(path: Path, content: bytes, *, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(content)
    os.replace(tmp, path)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)

"""Certificates for a cluster: one CA, one member certificate, one client certificate.

The member certificate covers every member through wildcard SANs on the peer Service's
domain, so adding a member never needs a new certificate; it serves both the client and the
peer listener. The client certificate is the operator's own identity towards etcd. All of it
lands in the <cluster>-tls Secret (manifests.tls_secret). No I/O here: `now` comes in.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress

from attrs import frozen
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from actors.model import ClusterRef
from supervisor.kube import manifests

CA_LIFETIME = dt.timedelta(days=3650)
LEAF_LIFETIME = dt.timedelta(days=365)


@frozen
class TlsMaterial:
    """PEM bytes, keyed as in the Secret."""

    files: dict[str, bytes]

    def secret_data(self) -> dict[str, str]:
        return {k: base64.b64encode(v).decode() for k, v in self.files.items()}


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, unit: str = "") -> x509.Name:
    # X.509 caps each attribute at 64 characters; the namespace travels in its own attribute.
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "etcd-supervisor")]
    if unit:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit[:64]))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64]))
    return x509.Name(attributes)


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    common_name: str,
    *,
    now: dt.datetime,
    dns: list[str],
    usages: list[x509.ObjectIdentifier],
) -> tuple[bytes, bytes]:
    key = _key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))  # tolerate clock skew between nodes
        .not_valid_after(now + LEAF_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=True,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if dns:
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def member_dns_names(ref: ClusterRef, cluster_domain: str = manifests.DEFAULT_CLUSTER_DOMAIN) -> list[str]:
    return [
        *manifests.member_host_patterns(ref, cluster_domain),
        *manifests.client_service_hosts(ref, cluster_domain),
        "localhost",
    ]


def generate_cluster_tls(
    ref: ClusterRef, *, now: dt.datetime, cluster_domain: str = manifests.DEFAULT_CLUSTER_DOMAIN
) -> TlsMaterial:
    """A new CA and the certificates signed by it.

    The SANs follow cluster_domain once, at creation: the Secret is never regenerated while it
    exists (running members trust its CA), so the domain must not change over a cluster's life.
    """
    ca_key = _key()
    ca_name = _name(f"etcd-ca {ref.name}", ref.namespace)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    member_cert, member_key = _leaf(
        ca_key,
        ca_cert,
        f"etcd-member {ref.name}",
        now=now,
        dns=member_dns_names(ref, cluster_domain),
        # Peers present the same certificate as clients of each other: both usages.
        usages=[ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    client_cert, client_key = _leaf(
        ca_key, ca_cert, "etcd-supervisor", now=now, dns=[], usages=[ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    return TlsMaterial(
        files={
            manifests.TLS_CA_CERT: ca_cert.public_bytes(serialization.Encoding.PEM),
            manifests.TLS_CA_KEY: _pem_key(ca_key),
            manifests.TLS_CERT: member_cert,
            manifests.TLS_KEY: member_key,
            manifests.TLS_CLIENT_CERT: client_cert,
            manifests.TLS_CLIENT_KEY: client_key,
        }
    )

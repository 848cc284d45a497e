"""X.509 for the clusters we run and the servers our tests start: a CA and the leaves it signs.

Pure: the caller brings `now` and decides where the PEM goes (files, a Secret). Outside the
layering on purpose, so every adapter and the test harness share one way of making certificates.

Keys are EC P-256 throughout: fast to generate (a cluster's material is made inline, and tests
make a lot of it), and accepted by etcd 3.4/3.5, kube-apiserver and OpenSSL clients alike.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
from collections.abc import Sequence

from attrs import frozen
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ORGANIZATION = "etcd-supervisor"
# Tolerates clock skew between the machine that signs and the nodes that verify.
BACKDATE = dt.timedelta(minutes=5)


# Keys the supervisor signs with: its own CAs are EC; an adopted cluster's CA (spec.adopt) is
# often RSA (kubeadm makes RSA ones).
SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@frozen
class KeyPair:
    cert: x509.Certificate
    key: SigningKey

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @classmethod
    def from_pem(cls, cert_pem: bytes, key_pem: bytes) -> KeyPair:
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise ValueError(f"expected an EC or RSA private key, got {type(key).__name__}")
        return cls(cert=x509.load_pem_x509_certificate(cert_pem), key=key)


def new_ca(common_name: str, *, now: dt.datetime, lifetime: dt.timedelta, unit: str = "") -> KeyPair:
    """A self-signed CA that may sign leaves only (path length 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name, unit)
    cert = (
        _builder(name, name, key.public_key(), now=now, lifetime=lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert=cert, key=key)


def issue(
    ca: KeyPair,
    common_name: str,
    *,
    now: dt.datetime,
    lifetime: dt.timedelta,
    dns: Sequence[str] = (),
    ips: Sequence[str] = (),
    server_auth: bool,
    client_auth: bool,
) -> KeyPair:
    """A leaf signed by `ca`. etcd takes a client certificate's common name as its user name."""
    if not (server_auth or client_auth):
        raise ValueError("a leaf needs serverAuth, clientAuth or both")
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server_auth else []
    if client_auth:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    lifetime = min(lifetime, ca.cert.not_valid_after_utc - now)  # never past the CA's own end
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        _builder(_name(common_name), ca.cert.subject, key.public_key(), now=now, lifetime=lifetime)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return KeyPair(cert=builder.sign(ca.key, hashes.SHA256()), key=key)


def renewal_due(cert_pem: bytes, renew_before_seconds: float, now: dt.datetime) -> bool:
    """A certificate with renew_before_seconds or less left (or expired)."""
    not_after = x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc
    return (not_after - now).total_seconds() <= renew_before_seconds


def dates(cert: x509.Certificate) -> tuple[float, float]:
    """(when it was signed, when it expires) in unix seconds: notBefore less the backdating."""
    return (cert.not_valid_before_utc + BACKDATE).timestamp(), cert.not_valid_after_utc.timestamp()


def reissue(
    ca: KeyPair, leaf: x509.Certificate, *, now: dt.datetime, lifetime: dt.timedelta
) -> x509.Certificate:
    """`leaf` signed again by `ca` for a new life: same subject, key and extensions.

    The key is kept on purpose: a renewal then only swaps the certificate file, and a reader
    that loads the pair at any moment (etcd at each handshake reads the certificate and the key
    as two files) gets either the old or the new certificate, each matching the key it reads.
    """
    # Never past the CA's own end: a chain is only as good as its shortest link.
    lifetime = min(lifetime, ca.cert.not_valid_after_utc - now)
    builder = _builder(leaf.subject, ca.cert.subject, leaf.public_key(), now=now, lifetime=lifetime)  # type: ignore[arg-type]
    for extension in leaf.extensions:
        if isinstance(extension.value, x509.AuthorityKeyIdentifier):
            continue  # names the signer: a new CA (a rotation) has another key; OpenSSL checks it
        builder = builder.add_extension(extension.value, critical=extension.critical)
    authority = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key())
    return builder.add_extension(authority, critical=False).sign(ca.key, hashes.SHA256())


def load_bundle(pem: bytes) -> list[x509.Certificate]:
    """The certificates of a trust bundle (one or more PEM blocks), in order."""
    return x509.load_pem_x509_certificates(pem)


def bundle_pem(certs: Sequence[x509.Certificate]) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether `ca`'s key signed `cert` (the signature checked, not only the names)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def content_digest(*parts: bytes) -> str:
    """A short digest of some PEM material, in order."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:16]


def trust_digest(bundle: bytes, signer_key_pem: bytes) -> str:
    """What a member started with the CA material trusts and is signed by: the bundle's bytes
    and the signing CA's public key. A member whose digest differs from its store's must be
    restarted to take the CA material (etcd reads its trusted CAs once, at start)."""
    key = serialization.load_pem_private_key(signer_key_pem, password=None)
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(bundle + public).hexdigest()[:16]


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    *,
    now: dt.datetime,
    lifetime: dt.timedelta,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + lifetime)
    )


def _name(common_name: str, unit: str = "") -> x509.Name:
    # X.509 caps each attribute at 64 characters, hence the cut; a long qualifier such as a
    # namespace travels in its own attribute (the unit) rather than in the common name.
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION)]
    if unit:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit[:64]))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64]))
    return x509.Name(attributes)


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    # No keyEncipherment: an EC key cannot encipher (RFC 5480); TLS with it only signs.
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )

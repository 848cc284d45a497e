"""One cluster's generated CA material and leaves, and each change a renewal or a CA rotation
makes to it (actors/certificates.py, actors/ca_rotation.py decide which). Pure: PEM in, PEM
out, `now` given; the stores (supervisor/local/tls.py's files, supervisor/kube/certificates.py's
Secret) read and write it.

The material: the trust bundle (`ca.crt`, one CA or two during a rotation), the signing CA's key
(`ca.key`; its certificate is the bundle's entry with that key), a new CA made but not yet
signing (`ca-next.crt`/`ca-next.key`, between a rotation's BEGIN and SWITCH) and the leaves by
name. Leaves keep their keys through renewals and rotations: only certificates are re-signed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import attrs
from attrs import frozen
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from actors.certificates import Certificate, CertificateState, RotationRecord
from supervisor import pki

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
NEXT_CERT = "ca-next.crt"
NEXT_KEY = "ca-next.key"
# Where a rotated CA's common name says it was made; the part before it is kept across rotations.
ROTATED = " rotated "


@frozen
class Material:
    bundle: bytes
    signer_key: bytes
    leaves: Mapping[str, bytes]  # leaf name -> certificate PEM
    next_cert: bytes | None = None
    next_key: bytes | None = None

    def signer(self) -> pki.KeyPair:
        """The CA that signs: the bundle's certificate whose key is `ca.key`."""
        key = _public(self.signer_key)
        for cert in pki.load_bundle(self.bundle):
            if _spki(cert.public_key()) == key:
                return pki.KeyPair.from_pem(_pem(cert), self.signer_key)
        raise ValueError(f"no certificate in {CA_CERT} matches {CA_KEY}")

    def pending(self) -> pki.KeyPair | None:
        """The new CA waiting to sign; None when there is none, or it signs already (a switch
        cut short after the key moved)."""
        if self.next_cert is None or self.next_key is None:
            return None
        if _public(self.next_key) == _public(self.signer_key):
            return None
        return pki.KeyPair.from_pem(self.next_cert, self.next_key)


def state(material: Material, record: RotationRecord) -> CertificateState:
    """What the store holds, as actors/certificates.py and actors/ca_rotation.py read it."""
    signer = material.signer()
    leaves = {name: x509.load_pem_x509_certificate(pem) for name, pem in material.leaves.items()}
    return CertificateState(
        Certificate("ca", *pki.dates(signer.cert)),
        tuple(Certificate(name, *pki.dates(cert)) for name, cert in leaves.items()),
        trusted=len(pki.load_bundle(material.bundle)),
        pending_ca=material.pending() is not None,
        leaves_by_signer=all(pki.signed_by(cert, signer.cert) for cert in leaves.values()),
        trust=pki.trust_digest(material.bundle, material.signer_key),
        record=record,
    )


def renewed(material: Material, names: tuple[str, ...], *, now: dt.datetime, lifetime: float) -> Material:
    """The named leaves re-signed by the signing CA for `lifetime` seconds."""
    return _resigned(material, material.signer(), names, now=now, lifetime=lifetime)


def begun(material: Material, *, now: dt.datetime, lifetime: float) -> Material:
    """BEGIN: a new CA (or the one made before a crash) trusted beside the signing one."""
    signer = material.signer()
    pending = material.pending() or _successor(signer.cert, now=now, lifetime=lifetime)
    return attrs.evolve(
        material,
        bundle=pki.bundle_pem([signer.cert, pending.cert]),
        next_cert=pending.cert_pem(),
        next_key=pending.key_pem(),
    )


def switched(material: Material, *, now: dt.datetime, lifetime: float) -> Material:
    """SWITCH: every leaf re-signed by the new CA, whose key becomes the signing key."""
    pending = material.pending()
    if pending is None:  # cut short after the key moved: re-sign what is left with the signer
        pending = material.signer()
    resigned = _resigned(material, pending, tuple(material.leaves), now=now, lifetime=lifetime)
    return attrs.evolve(resigned, signer_key=pending.key_pem(), next_cert=None, next_key=None)


def dropped(material: Material) -> Material:
    """DROP: only the signing CA left in the bundle."""
    return attrs.evolve(material, bundle=material.signer().cert_pem(), next_cert=None, next_key=None)


def _resigned(
    material: Material, issuer: pki.KeyPair, names: tuple[str, ...], *, now: dt.datetime, lifetime: float
) -> Material:
    leaves = dict(material.leaves)
    for name in names:
        leaf = x509.load_pem_x509_certificate(leaves[name])
        cert = pki.reissue(issuer, leaf, now=now, lifetime=dt.timedelta(seconds=lifetime))
        leaves[name] = _pem(cert)
    return attrs.evolve(material, leaves=leaves)


def _successor(ca: x509.Certificate, *, now: dt.datetime, lifetime: float) -> pki.KeyPair:
    """A new CA named after `ca`, with its lifetime, told apart by when it was made (two CAs of
    one name would leave chain building to guess)."""
    common = ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    units = ca.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)
    base = str(common[0].value).split(ROTATED)[0] if common else "etcd-ca"
    return pki.new_ca(
        f"{base}{ROTATED}{now:%Y%m%dT%H%M%S}",
        now=now,
        lifetime=dt.timedelta(seconds=lifetime),
        unit=str(units[0].value) if units else "",
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _public(key_pem: bytes) -> bytes:
    return _spki(serialization.load_pem_private_key(key_pem, password=None).public_key())


def _spki(public_key: object) -> bytes:
    return public_key.public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )

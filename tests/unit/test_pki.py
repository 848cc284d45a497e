"""supervisor.pki: the one place certificates are made, for clusters and for test servers alike."""

import datetime as dt
import ipaddress

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from supervisor import pki

NOW = dt.datetime(2030, 6, 1, 12, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


@pytest.fixture(scope="module")
def ca() -> pki.KeyPair:
    return pki.new_ca("test ca", now=NOW, lifetime=10 * DAY, unit="some-namespace")


def sans(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return ext.get_values_for_type(x509.DNSName), [str(ip) for ip in ext.get_values_for_type(x509.IPAddress)]


def test_ca_is_a_self_signed_ca_limited_to_signing_leaves(ca: pki.KeyPair) -> None:
    ca.cert.verify_directly_issued_by(ca.cert)
    constraints = ca.cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca and constraints.value.path_length == 0
    usage = ca.cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign
    assert ca.cert.not_valid_before_utc == NOW - pki.BACKDATE
    assert ca.cert.not_valid_after_utc == NOW + 10 * DAY
    assert ca.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "test ca"
    assert (
        ca.cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value == "some-namespace"
    )
    assert isinstance(ca.key, ec.EllipticCurvePrivateKey) and ca.key.curve.name == "secp256r1"


@pytest.fixture(scope="module")
def member(ca: pki.KeyPair) -> pki.KeyPair:
    dns, ips = ["localhost", "*.peers.ns.svc"], ["127.0.0.1", "::1"]
    return pki.issue(
        ca, "member", now=NOW, lifetime=DAY, dns=dns, ips=ips, server_auth=True, client_auth=True
    )


def test_server_leaf_verifies_against_its_ca_with_exactly_the_requested_names(
    ca: pki.KeyPair, member: pki.KeyPair
) -> None:
    member.cert.verify_directly_issued_by(ca.cert)
    assert member.cert.issuer == ca.cert.subject
    assert sans(member.cert) == (["localhost", "*.peers.ns.svc"], ["127.0.0.1", "::1"])
    assert list(member.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH,
        ExtendedKeyUsageOID.CLIENT_AUTH,
    ]
    assert not member.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = member.cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and not usage.key_cert_sign
    assert member.cert.not_valid_before_utc == NOW - pki.BACKDATE
    assert member.cert.not_valid_after_utc == NOW + DAY


def test_client_leaf_has_no_names_beyond_its_common_name(ca: pki.KeyPair) -> None:
    leaf = pki.issue(ca, "root", now=NOW, lifetime=DAY, server_auth=False, client_auth=True)
    leaf.cert.verify_directly_issued_by(ca.cert)
    assert leaf.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "root"
    with pytest.raises(x509.ExtensionNotFound):
        leaf.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert list(leaf.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]


def test_leaf_from_another_ca_does_not_verify(ca: pki.KeyPair) -> None:
    other = pki.new_ca("test ca", now=NOW, lifetime=DAY, unit="some-namespace")
    leaf = pki.issue(other, "x", now=NOW, lifetime=DAY, server_auth=False, client_auth=True)
    with pytest.raises(InvalidSignature):
        leaf.cert.verify_directly_issued_by(ca.cert)


def test_a_leaf_without_any_usage_is_refused(ca: pki.KeyPair) -> None:
    with pytest.raises(ValueError, match="serverAuth"):
        pki.issue(ca, "x", now=NOW, lifetime=DAY, server_auth=False, client_auth=False)


def test_long_names_are_cut_to_the_x509_limit() -> None:
    ca = pki.new_ca("c" * 100, now=NOW, lifetime=DAY, unit="u" * 100)
    assert len(ca.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value) == 64
    assert len(ca.cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value) == 64


def test_pem_round_trip(ca: pki.KeyPair) -> None:
    again = pki.KeyPair.from_pem(ca.cert_pem(), ca.key_pem())
    assert again.cert == ca.cert
    assert again.key.private_numbers() == ca.key.private_numbers()


@pytest.mark.parametrize(
    "name",
    [
        x509.DNSName("localhost"),
        x509.DNSName("m-0.peers.ns.svc"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ],
)
def test_a_chain_check_accepts_the_server_leaf_for_its_names(
    ca: pki.KeyPair, member: pki.KeyPair, name: x509.DNSName | x509.IPAddress
) -> None:
    from cryptography.x509.verification import PolicyBuilder, Store

    verifier = PolicyBuilder().store(Store([ca.cert])).time(NOW).build_server_verifier(name)
    assert verifier.verify(member.cert, [])[-1] == ca.cert


def test_a_reissued_leaf_keeps_its_key_names_and_usages_for_a_new_life(
    ca: pki.KeyPair, member: pki.KeyPair
) -> None:
    later = NOW + 5 * DAY
    renewed = pki.reissue(ca, member.cert, now=later, lifetime=2 * DAY)
    assert renewed.not_valid_after_utc == later + 2 * DAY
    assert renewed.not_valid_before_utc == later - pki.BACKDATE  # skew tolerated as on issue
    assert renewed.serial_number != member.cert.serial_number
    # The same key: the pair on disk is whole whichever of old and new certificate is read.
    assert renewed.public_key() == member.cert.public_key()
    assert renewed.subject == member.cert.subject
    assert {e.oid: e for e in renewed.extensions} == {e.oid: e for e in member.cert.extensions}
    renewed.verify_directly_issued_by(ca.cert)
    # Never past the CA (10 days from NOW here).
    capped = pki.reissue(ca, member.cert, now=later, lifetime=30 * DAY)
    assert capped.not_valid_after_utc == ca.cert.not_valid_after_utc


def test_a_leaf_reissued_by_another_ca_names_that_ca_as_its_authority(
    ca: pki.KeyPair, member: pki.KeyPair
) -> None:
    # A CA rotation's switch: OpenSSL refuses a chain whose authority key id names another key.
    successor = pki.new_ca("etcd-ca next", now=NOW, lifetime=10 * DAY)
    moved = pki.reissue(successor, member.cert, now=NOW, lifetime=DAY)
    authority = moved.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    assert authority == x509.AuthorityKeyIdentifier.from_issuer_public_key(successor.key.public_key())
    assert pki.signed_by(moved, successor.cert) and not pki.signed_by(moved, ca.cert)
    assert moved.public_key() == member.cert.public_key()

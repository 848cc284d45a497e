"""The CA of a TLS cluster being adopted (spec.adopt), from what the user gave in either mode.

The new members' peer certificates must be signed by the old cluster's peer CA, or the old
members refuse them; so the old peer CA (peerCASecret: ca.crt, ca.key) becomes the new cluster's
CA, signing every leaf the supervisor issues (members, its own client identity). One CA then
serves clients and peers, as the supervisor's own clusters do: an old cluster whose clients
trust another CA than its peers (clientSecret's ca.crt) is refused by name, since its members
would not take the supervisor's client certificate.
"""

from __future__ import annotations

from collections.abc import Mapping

from cryptography import x509

from supervisor import pki

PEER_CA = "spec.adopt.peerCASecret"
CLIENT = "spec.adopt.clientSecret"


class AdoptionRefused(ValueError):
    """What the user gave for adoption cannot be used; the message names the field and the rule."""


def adopted_ca(peer_ca: Mapping[str, bytes], client: Mapping[str, bytes]) -> pki.KeyPair:
    """The old cluster's peer CA as a signing pair: `peer_ca` holds ca.crt and ca.key, `client`
    at least ca.crt (the CA the old servers and their clients use)."""
    cert_pem, key_pem = _need(peer_ca, PEER_CA, "ca.crt"), _need(peer_ca, PEER_CA, "ca.key")
    try:
        pair = pki.KeyPair.from_pem(cert_pem, key_pem)
    except ValueError as e:
        raise AdoptionRefused(
            f"{PEER_CA}: ca.crt and ca.key must be a PEM certificate and its key: {e}"
        ) from e
    if not _is_ca(pair.cert):
        raise AdoptionRefused(f"{PEER_CA}: ca.crt must be a CA certificate (basicConstraints CA:TRUE)")
    if not _same_key(pair):
        raise AdoptionRefused(f"{PEER_CA}: ca.key is not the key of ca.crt")
    client_ca = x509.load_pem_x509_certificate(_need(client, CLIENT, "ca.crt"))
    if client_ca.public_key() != pair.cert.public_key():
        raise AdoptionRefused(
            f"{CLIENT}: ca.crt must be the same CA as {PEER_CA}'s: the adopted cluster's members and"
            " the supervisor share one CA for clients and peers, and old members whose clients trust"
            " another CA would refuse the supervisor's client certificate"
        )
    return pair


def _need(files: Mapping[str, bytes], field: str, name: str) -> bytes:
    content = files.get(name)
    if not content:
        raise AdoptionRefused(f"{field}: {name} is missing or empty")
    return content


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _same_key(pair: pki.KeyPair) -> bool:
    return pair.key.public_key() == pair.cert.public_key()

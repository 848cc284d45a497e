"""The CA of a TLS cluster being adopted: the old peer CA becomes the new cluster's signer; what
cannot serve is refused naming the field and the rule."""

import datetime as dt

import pytest

from supervisor import pki
from supervisor.adopted_ca import AdoptionRefused, adopted_ca

NOW = dt.datetime.now(dt.UTC)


def ca(name: str = "old-ca") -> pki.KeyPair:
    return pki.new_ca(name, now=NOW, lifetime=dt.timedelta(days=30))


def secrets(peer: pki.KeyPair, client_ca: pki.KeyPair | None = None):
    return {"ca.crt": peer.cert_pem(), "ca.key": peer.key_pem()}, {"ca.crt": (client_ca or peer).cert_pem()}


def test_the_old_peer_ca_signs_and_an_adopted_leaf_chains_to_it():
    old = ca()
    pair = adopted_ca(*secrets(old))
    leaf = pki.issue(
        pair, "demo-0", now=NOW, lifetime=dt.timedelta(days=90), server_auth=True, client_auth=True
    )
    assert pki.signed_by(leaf.cert, old.cert)
    assert leaf.cert.not_valid_after_utc <= old.cert.not_valid_after_utc  # never past the CA's end


@pytest.mark.parametrize(
    ("mangle", "field", "words"),
    [
        (lambda p, c: ({"ca.crt": p["ca.crt"]}, c), "spec.adopt.peerCASecret", "ca.key is missing"),
        (lambda p, c: (p, {}), "spec.adopt.clientSecret", "ca.crt is missing"),
        (
            lambda p, c: ({**p, "ca.key": ca("other").key_pem()}, c),
            "spec.adopt.peerCASecret",
            "not the key of",
        ),
        (lambda p, c: ({**p, "ca.crt": b"junk"}, c), "spec.adopt.peerCASecret", "PEM certificate"),
        (lambda p, c: (p, {"ca.crt": ca("other").cert_pem()}), "spec.adopt.clientSecret", "same CA"),
    ],
    ids=["no-key", "no-client-ca", "wrong-key", "not-pem", "two-cas"],
)
def test_what_cannot_be_adopted_is_refused_naming_the_field(mangle, field, words):
    with pytest.raises(AdoptionRefused) as refused:
        adopted_ca(*mangle(*secrets(ca())))
    assert str(refused.value).startswith(field) and words in str(refused.value)


def test_a_leaf_is_not_a_ca():
    leaf = pki.issue(ca(), "x", now=NOW, lifetime=dt.timedelta(days=1), server_auth=True, client_auth=False)
    with pytest.raises(AdoptionRefused, match="must be a CA certificate"):
        adopted_ca({"ca.crt": leaf.cert_pem(), "ca.key": leaf.key_pem()}, {"ca.crt": leaf.cert_pem()})

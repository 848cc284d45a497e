"""Certificates the user brings (secretRef): what is checked, each problem naming its key, and
the spec rules around the field."""

from __future__ import annotations

import base64
import datetime as dt

import pytest

from actors.codec import InvalidCluster, parse_cluster
from actors.model import ClusterSpec
from actors.spec_changes import refused_changes
from supervisor import pki
from supervisor.kube import byo_tls
from supervisor.kube.certificates import trust_of

NOW = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


def user_secret(ca: pki.KeyPair | None = None, **overrides: bytes) -> dict[str, str]:
    """A usable Secret's data as the API returns it (base64), with some keys replaced."""
    ca = ca or pki.new_ca("user ca", now=NOW, lifetime=100 * DAY)
    server = pki.issue(
        ca, "server", now=NOW, lifetime=10 * DAY, dns=["x"], server_auth=True, client_auth=False
    )
    peer = pki.issue(ca, "peer", now=NOW, lifetime=10 * DAY, dns=["x"], server_auth=True, client_auth=True)
    client = pki.issue(ca, "root", now=NOW, lifetime=10 * DAY, server_auth=False, client_auth=True)
    pems = {
        "ca.crt": ca.cert_pem(),
        "server.crt": server.cert_pem(),
        "server.key": server.key_pem(),
        "peer.crt": peer.cert_pem(),
        "peer.key": peer.key_pem(),
        "client.crt": client.cert_pem(),
        "client.key": client.key_pem(),
        **overrides,
    }
    return {k: base64.b64encode(v).decode() for k, v in pems.items()}


def test_a_complete_secret_has_no_problem_and_is_copied_under_the_clusters_names() -> None:
    data = user_secret()
    assert byo_tls.problems(data, now=NOW) == []
    copy = byo_tls.copied(data)
    assert copy["tls.crt"] == data["server.crt"] and copy["peer.key"] == data["peer.key"]
    assert set(copy) == {"ca.crt", "tls.crt", "tls.key", "peer.crt", "peer.key", "client.crt", "client.key"}


def test_each_problem_names_the_key() -> None:
    data = user_secret()
    missing = {k: v for k, v in data.items() if k != "peer.key"}
    assert byo_tls.problems(missing, now=NOW) == ["missing peer.key"]
    other = pki.new_ca("someone else", now=NOW, lifetime=100 * DAY)
    stranger = pki.issue(other, "peer", now=NOW, lifetime=DAY, server_auth=True, client_auth=True)
    foreign = user_secret(**{"peer.crt": stranger.cert_pem(), "peer.key": stranger.key_pem()})
    assert byo_tls.problems(foreign, now=NOW) == ["peer.crt is not signed by a CA in ca.crt"]
    mismatched = {**data, "client.key": data["server.key"]}
    assert byo_tls.problems(mismatched, now=NOW) == ["client.key is not the key of client.crt"]
    assert byo_tls.problems(data, now=NOW + 11 * DAY) == [
        "server.crt expired at 2026-12-07T00:00:00Z",
        "peer.crt expired at 2026-12-07T00:00:00Z",
        "client.crt expired at 2026-12-07T00:00:00Z",
    ]
    ca = pki.new_ca("user ca", now=NOW, lifetime=100 * DAY)
    server_only = pki.issue(ca, "peer", now=NOW, lifetime=DAY, server_auth=True, client_auth=False)
    one_way = user_secret(ca, **{"peer.crt": server_only.cert_pem(), "peer.key": server_only.key_pem()})
    assert byo_tls.problems(one_way, now=NOW) == [
        "peer.crt: needs both serverAuth and clientAuth (etcd presents it to its peers)"
    ]
    garbage = {**data, "ca.crt": base64.b64encode(b"not pem").decode()}
    assert byo_tls.problems(garbage, now=NOW)[0].startswith("ca.crt: not PEM certificates")


def test_any_change_of_the_users_certificates_changes_the_trust_digest() -> None:
    ca = pki.new_ca("user ca", now=NOW, lifetime=100 * DAY)
    first, again = byo_tls.copied(user_secret(ca)), byo_tls.copied(user_secret(ca))
    assert trust_of(first) != trust_of(again)  # new leaves, same CA: members take them by a roll
    assert trust_of(first) == trust_of(dict(first))


def cluster_doc(tls: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "demo"},
        "spec": {"security": {"tls": tls}},
    }


def test_the_spec_names_the_secret_and_refuses_what_cannot_work() -> None:
    spec = parse_cluster(cluster_doc({"secretRef": {"name": "my-tls"}})).spec
    assert spec.tls_secret == "my-tls" and spec.tls_enabled
    with pytest.raises(InvalidCluster, match=r"spec.security.tls.secretRef.name: must name a Secret"):
        parse_cluster(cluster_doc({"secretRef": {"name": "My_TLS"}}))
    with pytest.raises(InvalidCluster, match=r"spec.security.tls.secretRef: needs TLS"):
        parse_cluster(cluster_doc({"enabled": False, "secretRef": {"name": "my-tls"}}))
    with pytest.raises(InvalidCluster, match=r"spec.security.tls.secretRef: give one source"):
        parse_cluster(cluster_doc({"secretRef": {"name": "my-tls"}, "issuerRef": {"name": "ca-issuer"}}))
    (refused,) = refused_changes(ClusterSpec(), ClusterSpec(tls_secret="my-tls"))
    assert refused.field == "spec.security.tls.secretRef"

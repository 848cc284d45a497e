"""Certificates from cert-manager (issuerRef): the spec rules, the Certificates the operator makes,
how their Secrets become brought material, and what CertificatesValid says of them."""

from __future__ import annotations

import base64
import datetime as dt

import pytest

from actors.certificates import TlsReport, certificates_condition
from actors.codec import InvalidCluster, parse_cluster
from actors.model import CertificatesSpec, ClusterRef, ClusterSpec, IssuerRef
from actors.pod_template import kubernetes_only
from actors.spec_changes import refused_changes
from supervisor import brought_tls, pki
from supervisor.kube import byo_tls, issued_tls
from supervisor.kube import manifests as m
from supervisor.kube.cluster_objects import cluster_objects
from tests.unit.test_byo_tls import cluster_doc

NOW = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)
REF = ClusterRef("team-a", "demo")


def test_the_spec_names_the_issuer_and_refuses_what_cannot_work() -> None:
    spec = parse_cluster(cluster_doc({"issuerRef": {"name": "ca-issuer"}})).spec
    assert spec.tls_issuer == IssuerRef("ca-issuer", "Issuer", "cert-manager.io")
    assert spec.tls_secret is None and m.tls_source(spec) == spec.tls_issuer
    cluster_wide = parse_cluster(cluster_doc({"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}})).spec
    assert cluster_wide.tls_issuer == IssuerRef("ca", "ClusterIssuer")
    with pytest.raises(
        InvalidCluster, match=r"spec.security.tls.issuerRef.kind: must be Issuer or ClusterIssuer"
    ):
        parse_cluster(cluster_doc({"issuerRef": {"name": "ca", "kind": "Vault"}}))
    with pytest.raises(InvalidCluster, match=r"spec.security.tls.issuerRef.name: must name an issuer"):
        parse_cluster(cluster_doc({"issuerRef": {"name": "Bad_Name"}}))
    with pytest.raises(InvalidCluster, match=r"spec.security.tls.issuerRef: needs TLS"):
        parse_cluster(cluster_doc({"enabled": False, "issuerRef": {"name": "ca"}}))
    (refused,) = refused_changes(ClusterSpec(), ClusterSpec(tls_issuer=IssuerRef("ca")))
    assert refused.field == "spec.security.tls.issuerRef"
    # Locally: accepted, reported as ignored (SpecIgnored), generated certificates used.
    assert "spec.security.tls.issuerRef" in kubernetes_only(spec)


def test_three_certificates_name_the_issuer_the_members_and_the_lives() -> None:
    spec = ClusterSpec(
        tls_issuer=IssuerRef("ca-issuer"), certificates=CertificatesSpec(validity="2h", renew_before="30m")
    )
    made = cluster_objects(spec, cluster_domain="cluster.local", now=lambda: NOW)
    certs = [o.build(m.Owner(REF, "uid-1")) for o in made if o.what.endswith("Certificate")]
    assert [c["metadata"]["name"] for c in certs] == ["demo-tls-server", "demo-tls-peer", "demo-tls-client"]
    assert not [o for o in made if o.what == "TLS Secret"], "nothing generated: the copy is byo_tls's"
    server, peer, client = (c["spec"] for c in certs)
    assert server["secretName"] == "demo-tls-server"
    assert server["issuerRef"] == {"name": "ca-issuer", "kind": "Issuer", "group": "cert-manager.io"}
    assert (server["duration"], server["renewBefore"]) == ("7200s", "1800s")
    assert "*.demo-peer.team-a.svc.cluster.local" in server["dnsNames"]
    assert "demo-client.team-a.svc" in server["dnsNames"] and server["ipAddresses"] == ["127.0.0.1"]
    assert "client auth" not in server["usages"]
    assert {"server auth", "client auth"} <= set(peer["usages"])
    assert client["usages"][0] == "client auth" and "dnsNames" not in client
    assert certs[0]["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    # cert-manager's floor is an hour: a shorter validity is lengthened, renewBefore stays inside.
    short = issued_tls.certificate_spec(REF, "peer", IssuerRef("x"), CertificatesSpec(validity="2m"), "c.l")
    assert short["duration"] == "3600s" and int(short["renewBefore"][:-1]) < 3600


def issued_secret(ca: pki.KeyPair, leaf: str) -> dict[str, str]:
    pair = pki.issue(
        ca,
        leaf,
        now=NOW,
        lifetime=10 * DAY,
        dns=["x"],
        server_auth=leaf != "client",
        client_auth=leaf != "server",
    )
    pems = {"tls.crt": pair.cert_pem(), "tls.key": pair.key_pem(), "ca.crt": ca.cert_pem()}
    return {k: base64.b64encode(v).decode() for k, v in pems.items()}


def test_the_three_secrets_are_one_set_of_brought_material() -> None:
    ca = pki.new_ca("cm ca", now=NOW, lifetime=100 * DAY)
    data = issued_tls.assembled({leaf: issued_secret(ca, leaf) for leaf in issued_tls.LEAVES})
    assert set(data) == set(brought_tls.NAMES)
    assert byo_tls.problems(data, now=NOW + DAY) == []
    assert len(pki.load_bundle(base64.b64decode(data["ca.crt"]))) == 1, "one CA, named once"
    # A Secret issued by another CA (an issuer changed its CA): both are trusted.
    other = pki.new_ca("cm ca 2", now=NOW, lifetime=100 * DAY)
    mixed = issued_tls.assembled(
        {**{k: issued_secret(ca, k) for k in ("server", "peer")}, "client": issued_secret(other, "client")}
    )
    assert len(pki.load_bundle(base64.b64decode(mixed["ca.crt"]))) == 2


def test_a_certificate_not_ready_says_its_reason() -> None:
    assert issued_tls.not_ready(None) == "not made yet"
    assert issued_tls.not_ready({"status": {}}) == "no Ready condition yet"
    ready = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}}
    assert issued_tls.not_ready(ready) == ""
    pending = {"type": "Ready", "status": "False", "reason": "DoesNotExist", "message": "Issuing certificate"}
    assert issued_tls.not_ready({"status": {"conditions": [pending]}}) == "DoesNotExist: Issuing certificate"


def test_certificates_valid_names_the_issuer() -> None:
    lives = CertificatesSpec()
    failing = TlsReport(
        None,
        failure="spec.security.tls.issuerRef (Issuer nope): no Issuer nope in team-a; Certificate"
        " demo-tls-server not issued",
        source="cert-manager Issuer nope",
        issued=True,
    )
    condition = certificates_condition(failing, lives, NOW.timestamp())
    assert (condition.status, condition.reason) == ("False", "CertificateNotReady")
    assert "issuerRef (Issuer nope)" in condition.message
    assert str(IssuerRef("ca-issuer")) == "cert-manager Issuer ca-issuer"

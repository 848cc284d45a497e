"""Certificates from a real cert-manager (spec.security.tls.issuerRef) on the three nodes: its
controller built from the Go module, run on this host (tests/harness/certmanager.py), a CA Issuer
made from a CA this test generates.

- The cluster forms on cert-manager's certificates: every member serves (client port) the
  certificate in the server Certificate's Secret, issued by the test's CA, and mounts the peer
  Certificate's (the peer port admits only the cluster's pods, so it is read from the copy the
  members mount); CertificatesValid says where they come from.
- A renewal by cert-manager (asked for as `cmctl renew` does) is a change of those Secrets: the
  operator copies it and restarts the members one at a time (never two members down at once),
  and each then serves the new serials.
- A cluster naming an issuer that does not exist makes no member and says so on
  CertificatesValid, naming the field and the issuer; the other cluster is untouched.
"""

from __future__ import annotations

import base64
import datetime as dt
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from supervisor import pki
from supervisor.kube import issued_tls
from supervisor.kube import manifests as m
from supervisor.kube.certificates import trust_of
from tests.harness import members_on_nodes as on
from tests.harness.certmanager import ca_issuer, cert_manager_dir, renew, running_cert_manager
from tests.harness.cluster import Cluster
from tests.harness.components import require
from tests.harness.formation import etcd_cluster, is_ready, wait_for
from tests.harness.nodes import Nodes
from tests.harness.served_cert import served_certificate

pytestmark = pytest.mark.slow

NAME = "issued"
BAD = "misissued"


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == kind), {})


def _certificates_valid(cluster: Cluster, ns: str, name: str, status: str) -> dict[str, Any]:
    """The cluster's CertificatesValid condition once its status is `status`."""

    def seen() -> dict[str, Any] | None:
        found = _condition(cluster.get_json("etcdcluster", name, namespace=ns), "CertificatesValid")
        return found if found.get("status") == status else None

    return dict(wait_for(f"CertificatesValid {status} on {name}", seen, 60))


def _cert(cluster: Cluster, ns: str, secret: str) -> x509.Certificate:
    data = cluster.get_json("secret", secret, namespace=ns)["data"]
    return x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))


def _client_files(cluster: Cluster, ns: str, work: Path) -> tuple[Path, Path, Path]:
    """The operator's client pair as cert-manager issued it, and the CA, written under `work`."""
    data = cluster.get_json(
        "secret", issued_tls.certificate_name(m.ClusterRef(ns, NAME), "client"), namespace=ns
    )["data"]
    work.mkdir(parents=True, exist_ok=True)
    out = []
    for key in ("ca.crt", "tls.crt", "tls.key"):
        (work / key).write_bytes(base64.b64decode(data[key]))
        out.append(work / key)
    return out[0], out[1], out[2]


def _served(ips: list[str], port: int, files: tuple[Path, Path, Path]) -> dict[str, int]:
    return {ip: served_certificate(ip, port, *files).serial_number for ip in ips}


def _copy(cluster: Cluster, ns: str) -> dict[str, str]:
    """The cluster's <cluster>-tls Secret's data: the copy of cert-manager's Secrets the members mount."""
    return dict(cluster.get_json("secret", m.tls_secret_name(m.ClusterRef(ns, NAME)), namespace=ns)["data"])


def _serial(data: dict[str, str], key: str) -> int:
    return int(x509.load_pem_x509_certificate(base64.b64decode(data[key])).serial_number)


def _copied_peer(cluster: Cluster, ns: str) -> int:
    return _serial(_copy(cluster, ns), m.TLS_PEER_CERT)


def _etcd_running(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any(c.get("name") == "etcd" and "running" in (c.get("state") or {}) for c in statuses)


def _member_ips(cluster: Cluster, ns: str) -> list[str]:
    return sorted(
        p["status"]["podIP"] for p in on.live_members(cluster, ns, NAME) if p["status"].get("podIP")
    )


def _healthy(cluster: Cluster, ns: str, name: str) -> dict[str, Any] | None:
    obj = cluster.get_json("etcdcluster", name, namespace=ns)
    status = obj.get("status") or {}
    ok = status.get("phase") == "Running" and status.get("readyReplicas") == 3
    return obj if ok and len(status.get("members") or []) == 3 else None


def test_a_cluster_forms_on_cert_managers_certificates_and_rolls_its_renewal(
    three_nodes: Nodes, etcd_nodes: Cluster, nodes_namespace: str, nodes_operator: Path, tmp_path: Path
) -> None:
    built = require("cert-manager's controller and CRDs (make certmanager)", cert_manager_dir)
    ns, cluster = nodes_namespace, etcd_nodes
    ref = m.ClusterRef(ns, NAME)
    ca = pki.new_ca("etcd test cert-manager CA", now=dt.datetime.now(dt.UTC), lifetime=dt.timedelta(days=30))
    with running_cert_manager(three_nodes, built):
        ca_issuer(three_nodes, ns, "ca-issuer", ca)
        began = time.monotonic()
        good = etcd_cluster(NAME, cluster.etcd_version, tls=True)
        good["spec"]["security"]["tls"]["issuerRef"] = {"name": "ca-issuer", "kind": "Issuer"}
        good["spec"]["security"]["tls"]["certificates"] = {"validity": "2h", "renewBefore": "1h"}
        bad = etcd_cluster(BAD, cluster.etcd_version, tls=True)
        bad["spec"]["security"]["tls"]["issuerRef"] = {"name": "nope"}
        cluster.apply([good, bad], namespace=ns)

        obj = wait_for(f"{NAME} Running on three members", lambda: _healthy(cluster, ns, NAME), 300, poll=1.0)
        formed = time.monotonic() - began
        valid = _certificates_valid(cluster, ns, NAME, "True")
        assert valid["message"] == "from cert-manager Issuer ca-issuer", valid
        cert = cluster.get_json("certificate", issued_tls.certificate_name(ref, "peer"), namespace=ns)
        assert cert["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
        assert cert["spec"]["duration"] == "7200s" and cert["spec"]["renewBefore"] == "3600s"

        # Every member serves cert-manager's server certificate (client port) and peer certificate.
        files = _client_files(cluster, ns, tmp_path / "client")
        server = _cert(cluster, ns, issued_tls.certificate_name(ref, "server"))
        peer = _cert(cluster, ns, issued_tls.certificate_name(ref, "peer"))
        assert server.issuer == ca.cert.subject and peer.issuer == ca.cert.subject
        ips = _member_ips(cluster, ns)
        assert len(ips) == 3
        assert set(_served(ips, m.CLIENT_PORT, files).values()) == {server.serial_number}
        # The peer port admits only the cluster's own pods (its NetworkPolicy): the peer pair the
        # members mount is the copy's, which must be cert-manager's.
        assert _copied_peer(cluster, ns) == peer.serial_number

        # The bad issuer: said on the other cluster, naming the field and the issuer; no member.
        said = _certificates_valid(cluster, ns, BAD, "False")
        assert said["reason"] == "CertificateNotReady", said
        assert "spec.security.tls.issuerRef (Issuer nope)" in said["message"], said
        assert "no Issuer nope" in said["message"], said
        assert on.live_members(cluster, ns, BAD) == []

        # cert-manager renews (as `cmctl renew` asks): the operator rolls the members one at a time.
        uids = {p["metadata"]["uid"] for p in on.live_members(cluster, ns, NAME)}
        renewing = time.monotonic()
        for leaf in ("server", "peer"):
            renew(three_nodes, ns, issued_tls.certificate_name(ref, leaf))
        old = {"server": server, "peer": peer}

        def reissued(leaf: str) -> x509.Certificate:
            name = issued_tls.certificate_name(ref, leaf)
            return wait_for(
                f"the {leaf} Certificate reissued",
                lambda: (c := _cert(cluster, ns, name)).serial_number != old[leaf].serial_number and c,
                120,
            )

        new_server, new_peer = reissued("server"), reissued("peer")
        renewed = (new_server.serial_number, new_peer.serial_number)
        most_down = 0

        def rolled() -> bool:
            # Down: a member whose etcd is not running (pod deleted, or its container not
            # started yet).
            nonlocal most_down
            live = on.live_members(cluster, ns, NAME)
            most_down = max(most_down, 3 - sum(1 for p in live if _etcd_running(p)))
            # cert-manager writes each Certificate's Secret by itself and the operator looks every
            # BROUGHT_LOOK seconds, so the two renewals may reach the copy, and be rolled out, in
            # two steps. Done once the copy holds both and every member pod was made from it.
            copy = _copy(cluster, ns)
            if (_serial(copy, m.TLS_CERT), _serial(copy, m.TLS_PEER_CERT)) != renewed:
                return False
            trust = trust_of(copy)
            made_from_copy = [
                p
                for p in live
                if is_ready(p)
                and p["metadata"]["uid"] not in uids
                and (p["metadata"].get("annotations") or {}).get(m.ANNOTATION_TRUST) == trust
            ]
            return len(made_from_copy) == 3 and _healthy(cluster, ns, NAME) is not None

        wait_for("every member restarted on the renewed certificates", rolled, 600, poll=0.5)
        rolled_in = time.monotonic() - renewing
        assert most_down <= 1, f"{most_down} members down at once"
        ips = _member_ips(cluster, ns)
        files = _client_files(cluster, ns, tmp_path / "client-renewed")
        assert set(_served(ips, m.CLIENT_PORT, files).values()) == {new_server.serial_number}
        assert _copied_peer(cluster, ns) == new_peer.serial_number
        valid = _condition(cluster.get_json("etcdcluster", NAME, namespace=ns), "CertificatesValid")
        assert valid["status"] == "True", valid
        print(
            f"\nformed on cert-manager's certificates in {formed:.1f}s;"
            f" renewal rolled out in {rolled_in:.1f}s"
        )

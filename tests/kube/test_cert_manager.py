"""Certificates from a real cert-manager (issuerRef) on a real kube-apiserver, members run by the
stand-in kubelet: quick and without the nodes' lock (tests/nodes/test_cert_manager.py is the same
story on real pods). cert-manager's controller is the one built from its Go module
(tests/harness/certmanager.py); a CA Issuer signs with a CA this test makes."""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path

import pytest
from cryptography import x509

from actors.model import ClusterRef
from supervisor import pki
from supervisor.etcd import EtcdClient, TlsFiles
from supervisor.kube import issued_tls
from supervisor.kube import manifests as m
from tests.harness.certmanager import ca_issuer, cert_manager_dir, renew, running_cert_manager
from tests.harness.components import require
from tests.harness.kube import KubeAPIServer
from tests.harness.poll import eventually
from tests.kube.test_operator import condition, create_cluster, healthy, operator_with_kubelet, wait_for

pytestmark = pytest.mark.slow


def _serial(data: dict[str, str]) -> int:
    return x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"])).serial_number


async def test_cert_managers_certificates_serve_their_renewal_rolls_out_and_a_missing_issuer_is_said(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    built = require("cert-manager's controller and CRDs (make certmanager)", cert_manager_dir)
    ns = kube_namespace
    ref = ClusterRef(ns, "demo")
    ca = pki.new_ca("test cert-manager CA", now=dt.datetime.now(dt.UTC), lifetime=dt.timedelta(days=30))
    secrets = m.core_path(ns, "secrets")
    with running_cert_manager(kube_crds, built, tmp_path / "cert-manager.log"):
        ca_issuer(kube_crds, ns, "ca-issuer", ca)
        async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
            tls = {
                "issuerRef": {"name": "ca-issuer"},
                "certificates": {"validity": "2h", "renewBefore": "1h"},
            }
            path = await create_cluster(admin, "demo", ns, {"size": 3, "security": {"tls": tls}})
            bad = await create_cluster(
                admin, "lost", ns, {"size": 3, "security": {"tls": {"issuerRef": {"name": "nope"}}}}
            )
            obj = await wait_for(admin, path, healthy(3), timeout=120)
            obj = await wait_for(
                admin, path, lambda o: condition(o, "CertificatesValid").get("status") == "True", timeout=30
            )
            assert condition(obj, "CertificatesValid")["message"] == "from cert-manager Issuer ca-issuer"
            server = (await admin.get(f"{secrets}/{issued_tls.certificate_name(ref, 'server')}"))["data"]
            copy = (await admin.get(f"{secrets}/demo-tls"))["data"]
            assert copy["tls.crt"] == server["tls.crt"]
            issued = x509.load_pem_x509_certificate(base64.b64decode(server["tls.crt"]))
            assert issued.issuer == ca.cert.subject
            files = tmp_path / "tls" / ns / "demo"
            client = TlsFiles(files / m.TLS_CA_CERT, files / m.TLS_CLIENT_CERT, files / m.TLS_CLIENT_KEY)
            etcd = EtcdClient([mem["clientURL"] for mem in obj["status"]["members"]], tls=client)
            try:
                await etcd.put(b"kept", b"through cert-manager's renewal")
            finally:
                await etcd.aclose()
            assert sorted(kubelet.runs) == ["demo-0", "demo-1", "demo-2"]

            said = await wait_for(
                admin, bad, lambda o: condition(o, "CertificatesValid").get("status") == "False", timeout=60
            )
            message = condition(said, "CertificatesValid")["message"]
            assert condition(said, "CertificatesValid")["reason"] == "CertificateNotReady"
            assert "spec.security.tls.issuerRef (Issuer nope)" in message and "no Issuer nope" in message
            assert not [r for r in kubelet.runs if r.startswith("lost-")]

            # cert-manager renews (as `cmctl renew` asks): the copy follows, each member restarts once.
            renew(kube_crds, ns, issued_tls.certificate_name(ref, "server"))
            await eventually(
                lambda: admin.get(f"{secrets}/demo-tls"),
                lambda c: _serial(c["data"]) != _serial(server),
                within=60,
                what="the copy of the reissued server certificate",
            )
            await eventually(
                lambda: len(kubelet.runs),
                lambda runs: runs == 6,
                within=120,
                what="each member restarted once",
            )
            obj = await wait_for(admin, path, healthy(3), timeout=60)
            etcd = EtcdClient([mem["clientURL"] for mem in obj["status"]["members"]], tls=client)
            try:
                assert await etcd.get(b"kept") == b"through cert-manager's renewal"
            finally:
                await etcd.aclose()

"""The TLS Secret's leaves renewed in place on a real kube-apiserver (same CA, same keys, a new
notAfter), the operator's own client files following, and status.tls in the subresource."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest
from cryptography import x509

from actors.model import (
    CertificatesSpec,
    ClusterRef,
    ClusterSpec,
    ClusterStatus,
    LastRotation,
    RotationKind,
    TlsStatus,
)
from supervisor.kube import manifests as m
from supervisor.kube.certificates import KubeCertificates
from supervisor.kube.runtime import KubeRuntime
from supervisor.kube.status import KubeStatusSink
from tests.harness.kube import KubeAPIServer
from tests.kube.clients import clients
from tests.kube.test_runtime import create_cluster

pytestmark = pytest.mark.slow

SHORT = CertificatesSpec(validity="40s", renew_before="25s")


def cert(data: dict[str, str], key: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(data[key]))


async def test_the_secrets_leaves_are_renewed_in_place_from_the_same_ca(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ref = ClusterRef(kube_namespace, "renew")
    async with clients(kube_crds, operator_kubeconfig) as (op, admin):
        await create_cluster(
            admin, kube_namespace, "renew", security={"tls": {"certificates": {"validity": "40s"}}}
        )
        # The Secret is made with the member's first step, its leaves living the spec's validity.
        await KubeRuntime(op).allocate_member(ref, "renew-0", ClusterSpec(certificates=SHORT))
        secret_path = m.core_path(kube_namespace, "secrets", m.tls_secret_name(ref))
        before = (await admin.get(secret_path))["data"]
        store = KubeCertificates(op, tmp_path)

        state = await store.read(ref)
        assert state is not None
        assert {leaf.name for leaf in state.leaves} == {"member", "client"}
        now = time.time()
        assert all(now + 20 < leaf.not_after <= now + 41 for leaf in state.leaves)
        assert state.ca.not_after > now + 3600 * 24 * 3000

        await store.renew(ref, ["member", "client"], 3600.0)

        after = (await admin.get(secret_path))["data"]
        # The CA and every key as they were: members keep trusting each other, and a reader of
        # the mounted volume gets a pair that matches whichever certificate it reads.
        for key in (m.TLS_CA_CERT, m.TLS_CA_KEY, m.TLS_KEY, m.TLS_CLIENT_KEY):
            assert after[key] == before[key], key
        ca = cert(after, m.TLS_CA_CERT)
        for key in (m.TLS_CERT, m.TLS_CLIENT_CERT):
            old, new = cert(before, key), cert(after, key)
            new.verify_directly_issued_by(ca)
            assert new.public_key() == old.public_key() and new.subject == old.subject
            assert new.not_valid_after_utc.timestamp() > now + 3500
        renewed = await store.read(ref)
        assert renewed is not None and all(leaf.not_after > now + 3500 for leaf in renewed.leaves)
        # The operator's own client files follow at once.
        files = tmp_path / kube_namespace / "renew"
        assert (files / m.TLS_CLIENT_CERT).read_bytes() == base64.b64decode(after[m.TLS_CLIENT_CERT])
        assert (files / m.TLS_CA_CERT).read_bytes() == base64.b64decode(after[m.TLS_CA_CERT])


async def test_status_tls_lands_in_the_subresource(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ref = ClusterRef(kube_namespace, "shown")
    async with clients(kube_crds, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, kube_namespace, "shown")
        tls = TlsStatus(2_000_000_000.0, 1_800_000_000.0, LastRotation(RotationKind.LEAF, 1_700_000_000.0))
        await KubeStatusSink(op, now=lambda: 1_700_000_000.0).publish(ref, ClusterStatus(tls=tls))
        status = (await admin.get(m.cluster_path(ref)))["status"]
        assert status["tls"] == {
            "caNotAfter": "2033-05-18T03:33:20Z",
            "leafNotAfter": "2027-01-15T08:00:00Z",
            "lastRotation": {"kind": "leaf", "completionTime": "2023-11-14T22:13:20Z"},
        }

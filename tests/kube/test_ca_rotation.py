"""A CA rotation asked for with the etcd.io/rotate-ca annotation, on a real kube-apiserver with
members run by the stand-in kubelet, under a checked workload: every pod remade three times,
one at a time, the Secret trusting only the new CA at the end."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import trio
from cryptography import x509

from supervisor import pki
from supervisor.etcd import TlsFiles
from supervisor.kube import manifests as m
from supervisor.kube.certificates import trust_of
from tests.harness.history import KvWorkload
from tests.harness.kube import KubeAPIServer
from tests.harness.poll import eventually
from tests.kube.test_operator import create_cluster, event_reasons, healthy, operator_with_kubelet, wait_for

pytestmark = pytest.mark.slow


def rotated_ca(obj: dict) -> bool:
    """status.tls says the last rotation was of the CA."""
    tls = (obj.get("status") or {}).get("tls") or {}
    return (tls.get("lastRotation") or {}).get("kind") == "ca"


async def test_the_annotation_rotates_the_ca_one_member_at_a_time_under_load(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    secret_path = m.core_path(ns, "secrets", "demo-tls")
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
        path = await create_cluster(admin, "demo", ns, {"size": 3})
        obj = await wait_for(admin, path, healthy(3), timeout=90)
        old_ca = pki.load_bundle(base64.b64decode((await admin.get(secret_path))["data"][m.TLS_CA_CERT]))
        # The operator's own copy of the client files, which it rewrites at every phase.
        files = tmp_path / "tls" / ns / "demo"
        workload = KvWorkload(
            endpoints=[mem["clientURL"] for mem in obj["status"]["members"]],
            max_operations=100_000,
            tls=TlsFiles(files / m.TLS_CA_CERT, files / m.TLS_CLIENT_CERT, files / m.TLS_CLIENT_KEY),
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            await workload.wait_for_more(50)
            await admin.merge_patch(path, {"metadata": {"annotations": {"etcd.io/rotate-ca": "first"}}})
            await eventually(
                lambda: event_reasons(admin, ns, "demo"),
                lambda reasons: "CARotated" in reasons,
                within=240,
                every=1.0,
                what="the CARotated Event",
            )
            # The Event is written before the status that says so: wait for both.
            await wait_for(admin, path, lambda obj: healthy(3)(obj) and rotated_ca(obj), timeout=60)
            await workload.wait_for_more(50)
            nursery.cancel_scope.cancel()

        data = (await admin.get(secret_path))["data"]
        (new_ca,) = pki.load_bundle(base64.b64decode(data[m.TLS_CA_CERT]))
        assert [new_ca] != old_ca
        for key in (m.TLS_CERT, m.TLS_CLIENT_CERT):
            assert pki.signed_by(x509.load_pem_x509_certificate(base64.b64decode(data[key])), new_ca)
        # Every pod made with the final material; each member remade once per phase, in turn.
        pods = (await admin.get(m.core_path(ns, "pods")))["items"]
        assert {p["metadata"]["annotations"][m.ANNOTATION_TRUST] for p in pods} == {trust_of(data)}
        assert sorted(kubelet.runs) == sorted(["demo-0", "demo-1", "demo-2"] * 4), kubelet.runs
        reasons = await event_reasons(admin, ns, "demo")
        phases = ["CARotationStarted", "CARotationSwitched", "CARotationDropping", "CARotated"]
        assert [r for r in reasons if r in phases] == phases

    verdict = await workload.check(tmp_path / "history")
    assert verdict.ok, verdict.report

"""Leaf certificates renewed on the real node: the operator re-signs the TLS Secret in place,
the kubelet refreshes the members' mounted volume, and etcd presents the new certificate at its
next handshake, with no pod replaced or restarted.

Leaves live 4 minutes and are renewed with 3 left, so the first renewal comes a minute after
the cluster is made; the kubelet updates a Secret volume at its next sync of the pod (about a
minute), well inside the 3 minutes the old certificate still has.
"""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path
from typing import Any

from cryptography import x509

from supervisor.kube import manifests as m
from tests.harness.cluster import Cluster
from tests.harness.formation import pods, wait_for
from tests.harness.served_cert import served_not_after

NAME = "renewing"


def manifest(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": NAME, "namespace": namespace},
        "spec": {
            "size": 3,
            "security": {"tls": {"enabled": True, "certificates": {"validity": "4m", "renewBefore": "3m"}}},
        },
    }


def status(cluster: Cluster, namespace: str) -> dict[str, Any]:
    return dict(cluster.get_json("etcdcluster", NAME, namespace=namespace).get("status") or {})


def secret_files(cluster: Cluster, namespace: str, work: Path) -> tuple[Path, Path, Path, dt.datetime]:
    """The Secret's CA and client pair as files, and its member certificate's notAfter."""
    data = cluster.get_json("secret", m.tls_secret_name(m.ClusterRef(namespace, NAME)), namespace=namespace)[
        "data"
    ]
    paths = []
    for key in (m.TLS_CA_CERT, m.TLS_CLIENT_CERT, m.TLS_CLIENT_KEY):
        (work / key).write_bytes(base64.b64decode(data[key]))
        paths.append(work / key)
    member = x509.load_pem_x509_certificate(base64.b64decode(data[m.TLS_CERT]))
    return paths[0], paths[1], paths[2], member.not_valid_after_utc


def etcd_containers(cluster: Cluster, namespace: str) -> dict[str, tuple[str, int]]:
    """member pod -> (its uid, its etcd container's restart count)."""
    out = {}
    for p in pods(cluster, namespace, f"{m.LABEL_INSTANCE}={NAME},{m.LABEL_COMPONENT}={m.COMPONENT_MEMBER}"):
        (etcd,) = (c for c in p["status"]["containerStatuses"] if c["name"] == "etcd")
        out[p["metadata"]["name"]] = (p["metadata"]["uid"], etcd["restartCount"])
    return out


def test_leaves_are_renewed_in_the_secret_and_taken_by_running_pods(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path, tmp_path: Path
) -> None:
    e2e_cluster.apply([manifest(e2e_namespace)])
    first = wait_for(
        "the cluster Running with status.tls",
        lambda: (
            (s := status(e2e_cluster, e2e_namespace)).get("phase") == "Running"
            and s.get("readyReplicas") == 3
            and "tls" in s
            and s
        ),
        180,
        poll=1.0,
        details=lambda: f"status: {status(e2e_cluster, e2e_namespace)}",
    )
    before = etcd_containers(e2e_cluster, e2e_namespace)
    assert len(before) == 3

    renewed = wait_for(
        "status.tls showing a renewal",
        lambda: (
            (s := status(e2e_cluster, e2e_namespace)).get("tls", {}).get("leafNotAfter", "")
            > first["tls"]["leafNotAfter"]
            and "lastRotation" in s["tls"]
            and s
        ),
        150,
        poll=1.0,
    )
    assert renewed["tls"]["lastRotation"]["kind"] == "leaf"
    ca, cert, key, member_not_after = secret_files(e2e_cluster, e2e_namespace, tmp_path)
    # Every member presents the renewed certificate on a new handshake, client and peer port
    # alike, once the kubelet has refreshed its volume.
    for p in pods(
        e2e_cluster, e2e_namespace, f"{m.LABEL_INSTANCE}={NAME},{m.LABEL_COMPONENT}={m.COMPONENT_MEMBER}"
    ):
        ip = p["status"]["podIP"]
        for port in (m.CLIENT_PORT, m.PEER_PORT):
            wait_for(
                f"{p['metadata']['name']}:{port} presenting the renewed certificate",
                lambda ip=ip, port=port: served_not_after(ip, port, ca, cert, key) == member_not_after,
                150,
                poll=2.0,
            )
    assert etcd_containers(e2e_cluster, e2e_namespace) == before, "a member pod was replaced or restarted"
    valid = {c["type"]: c for c in status(e2e_cluster, e2e_namespace)["conditions"]}["CertificatesValid"]
    assert valid["status"] == "True", valid

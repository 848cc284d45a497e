"""Leaf certificates renewed on the real node: the operator re-signs the TLS Secret in place,
the kubelet refreshes the members' mounted volume, and etcd presents the new certificate at its
next handshake, with no pod replaced or restarted; renewal after renewal, under a client
workload that keeps the CA and client pair it was given, with no failed request and a history
porcupine finds linearizable.

Leaves live 4 minutes and are renewed with 3 left, so the first renewal comes a minute after
the cluster is made; the kubelet updates a Secret volume at its next sync of the pod (about a
minute), well inside the 3 minutes the old certificate still has.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
from pathlib import Path
from typing import Any

from cryptography import x509

from supervisor.kube import manifests as m
from tests.harness import members_on_nodes as on
from tests.harness.cluster import Cluster
from tests.harness.formation import pods, wait_for
from tests.harness.served_cert import served_not_after

NAME = "renewing"
# Renewals in a row, a minute apart; CI runs two (the time of the one-node tier is tight):
# E2E_RENEWALS=5 runs the five.
RENEWALS = int(os.environ.get("E2E_RENEWALS", "2"))


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

    # Clients keep their connections across renewals and, when they do connect again, use the
    # CA and client pair they were given at the start: renewal must not change what they trust.
    workload = on.workload_for(
        e2e_cluster, e2e_namespace, NAME, tmp_path, max_operations=15_000 * (RENEWALS + 1)
    )
    leaf_not_after = first["tls"]["leafNotAfter"]
    with on.background(workload):
        on.answers_more(workload, "the workload's first answers")
        for renewal in range(1, RENEWALS + 1):
            leaf_not_after = renewed_and_served(e2e_cluster, e2e_namespace, tmp_path, leaf_not_after, renewal)
            on.answers_more(workload, f"answers after renewal {renewal}")
    # A request that raised failed; the few in flight when the workload is stopped at the end
    # are recorded too (as of unknown outcome, without an error) but were cut short by the test.
    operations = workload.history.operations
    failed = [(n, op) for n, op in enumerate(operations) if op.error is not None]
    assert not failed, (
        f"{len(failed)} of {len(operations)} client requests failed (index, operation): {failed[:4]}"
    )
    on.assert_linearizable(workload, tmp_path / "history")
    assert etcd_containers(e2e_cluster, e2e_namespace) == before, "a member pod was replaced or restarted"
    valid = {c["type"]: c for c in status(e2e_cluster, e2e_namespace)["conditions"]}["CertificatesValid"]
    assert valid["status"] == "True", valid


def renewed_and_served(cluster: Cluster, namespace: str, work: Path, previous: str, renewal: int) -> str:
    """Waits for the operator's next renewal (status.tls.leafNotAfter past `previous`), then for
    every member to present it, or a later one, on a new handshake, client and peer port alike,
    once the kubelet has refreshed its volume. Returns the renewal's leafNotAfter."""
    renewed = wait_for(
        f"status.tls showing renewal {renewal}",
        lambda: (
            (s := status(cluster, namespace)).get("tls", {}).get("leafNotAfter", "") > previous
            and "lastRotation" in s["tls"]
            and s
        ),
        150,
        poll=1.0,
    )
    assert renewed["tls"]["lastRotation"]["kind"] == "leaf"
    ca, cert, key, member_not_after = secret_files(cluster, namespace, work)
    for p in pods(cluster, namespace, f"{m.LABEL_INSTANCE}={NAME},{m.LABEL_COMPONENT}={m.COMPONENT_MEMBER}"):
        ip = p["status"]["podIP"]
        for port in (m.CLIENT_PORT, m.PEER_PORT):
            wait_for(
                f"{p['metadata']['name']}:{port} presenting renewal {renewal}",
                lambda ip=ip, port=port: served_not_after(ip, port, ca, cert, key) >= member_not_after,
                150,
                poll=2.0,
            )
    return str(renewed["tls"]["leafNotAfter"])

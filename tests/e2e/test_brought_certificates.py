"""Certificates the user brings (secretRef) on real pods: the cluster forms on the user's Secret,
its members serving the user's server certificate; the user renews the leaves in place and the
operator rolls that out, one member pod at a time, until every member serves the renewal, with
the data kept (issue 27's "bring your own" on the real node)."""

from __future__ import annotations

import base64
import datetime as dt
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from cryptography import x509

from actors.model import ClusterRef
from supervisor import pki
from supervisor.kube import manifests as m
from tests.harness import images
from tests.harness.cluster import Cluster
from tests.harness.formation import etcd_cluster, is_ready, pods, wait_for
from tests.harness.served_cert import served_certificate
from tests.kube.test_brought_certificates import leaves_for, secret_body
from tests.unit.test_byo_tls import NOW

NAME = "brought"
SELECTOR = f"{m.LABEL_INSTANCE}={NAME},{m.LABEL_COMPONENT}={m.COMPONENT_MEMBER}"


def user_files(data: dict[str, str], work: Path) -> tuple[Path, Path, Path]:
    """The user's CA and client pair from the Secret's data, as files."""
    paths = []
    for key in ("ca.crt", "client.crt", "client.key"):
        (work / key).write_bytes(base64.b64decode(data[key]))
        paths.append(work / key)
    return paths[0], paths[1], paths[2]


def served_serials(cluster: Cluster, namespace: str, files: tuple[Path, Path, Path]) -> dict[str, int]:
    """member pod -> the serial its client port presents on a new handshake, for the Ready pods
    that answer one (a pod being replaced may still show Ready for a moment)."""
    out = {}
    for p in pods(cluster, namespace, SELECTOR):
        if not is_ready(p) or not p["status"].get("podIP") or p["metadata"].get("deletionTimestamp"):
            continue
        try:
            out[p["metadata"]["name"]] = served_certificate(
                p["status"]["podIP"], m.CLIENT_PORT, *files
            ).serial_number
        except OSError:  # refused or reset: not serving now (ssl.SSLError is an OSError too)
            continue
    return out


def serial_of(data: dict[str, str]) -> int:
    return x509.load_pem_x509_certificate(base64.b64decode(data["server.crt"])).serial_number


def etcdctl(cluster: Cluster, namespace: str, files: tuple[Path, Path, Path], *args: str) -> str:
    """etcdctl through the cluster's client Service with the user's client pair."""
    client = f"https://{m.client_service_hosts(ClusterRef(namespace, NAME))[-1]}:{m.CLIENT_PORT}"
    ca, cert, key = files
    command: list[str | os.PathLike[str]] = [images.default_etcd_dir() / "etcdctl", f"--endpoints={client}"]
    command.append(f"--cacert={ca}")
    command += [f"--cert={cert}", f"--key={key}", *args]
    done = subprocess.run(cluster.host_dns_command(command), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def pod_uids(cluster: Cluster, namespace: str) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(cluster, namespace, SELECTOR)}


def test_a_users_secret_is_served_and_its_renewal_rolled_out_one_pod_at_a_time(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path, tmp_path: Path
) -> None:
    ns = e2e_namespace
    ref = ClusterRef(ns, NAME)
    ca = pki.new_ca("user ca", now=NOW, lifetime=dt.timedelta(days=3650))
    first = leaves_for(ref, ca)
    e2e_cluster.apply([secret_body("my-tls", first)], namespace=ns)
    spec: dict[str, Any] = etcd_cluster(NAME, e2e_cluster.etcd_version, tls=True)
    spec["spec"]["security"]["tls"]["secretRef"] = {"name": "my-tls"}
    e2e_cluster.apply([spec], namespace=ns)

    def status() -> dict[str, Any]:
        return dict(e2e_cluster.get_json("etcdcluster", NAME, namespace=ns).get("status") or {})

    wait_for("the cluster Running on the user's Secret", lambda: status().get("phase") == "Running", 180)
    files = user_files(first, tmp_path)
    assert set(served_serials(e2e_cluster, ns, files).values()) == {serial_of(first)}
    etcdctl(e2e_cluster, ns, files, "put", "kept", "through the user's renewal")
    # Running says etcd answers; the pods' readiness probes pass a moment later. The roll is
    # measured from all three Ready, or formation's not-yet-Ready pods would count as its own.
    ready = lambda: sum(1 for p in pods(e2e_cluster, ns, SELECTOR) if is_ready(p))  # noqa: E731
    wait_for("every member pod Ready before the renewal", lambda: ready() == 3, 60)
    before = pod_uids(e2e_cluster, ns)

    # The user renews the leaves (same CA, same names): a new Secret content is rolled out.
    renewed = leaves_for(ref, ca)
    e2e_cluster.apply([secret_body("my-tls", renewed)], namespace=ns)
    most_down, worst = 0, ""

    def rolled_out() -> bool:
        nonlocal most_down, worst
        members = pods(e2e_cluster, ns, SELECTOR)
        down = 3 - sum(1 for p in members if is_ready(p))
        if down > most_down:  # the pods as seen then, for a reader of a failure
            most_down, worst = down, f"{time.strftime('%H:%M:%S')}: {pod_readiness(members)}"
        serials = served_serials(e2e_cluster, ns, files)
        served = len(serials) == 3 and set(serials.values()) == {serial_of(renewed)}
        # The kubelet updates the Secret volume in place, so a member can serve the renewed
        # pair before its pod is replaced: the roll is done when every pod is new as well.
        replaced = set(before.values()).isdisjoint(p["metadata"]["uid"] for p in members)
        return served and replaced

    wait_for("every member serving the renewed certificate from a new pod", rolled_out, 240, poll=1.0)
    after = pod_uids(e2e_cluster, ns)
    assert sorted(after) == sorted(before) and all(after[n] != before[n] for n in before), (before, after)
    assert most_down <= 1, f"{most_down} member pods down at once: {worst}"
    wait_for("the cluster Running after the roll", lambda: status().get("phase") == "Running", 120)
    assert (
        etcdctl(e2e_cluster, ns, files, "get", "kept", "--print-value-only").strip()
        == "through the user's renewal"
    )
    valid = {c["type"]: c for c in status()["conditions"]}["CertificatesValid"]
    assert valid["status"] == "True" and "my-tls" in valid["message"], valid


def pod_readiness(members: list[dict[str, Any]]) -> str:
    """Each pod's name, uid's start, Ready and whether it is being deleted."""
    return ", ".join(
        f"{p['metadata']['name']}/{p['metadata']['uid'][:8]} ready={is_ready(p)}"
        + (" deleting" if p["metadata"].get("deletionTimestamp") else "")
        for p in members
    )

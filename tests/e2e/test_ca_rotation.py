"""A CA rotation on real pods (issue 27), asked for with the etcd.io/rotate-ca annotation, under
a client workload recorded for porcupine, with the operator killed (SIGKILL, no goodbye) once
the new CA has started signing and a second operator taking the rotation up from what the
Secret and the pods' trust annotations say.

The clients are the cluster's own kind: they keep the material they hold and, like a user's
client that mounts the Secret, see its new content when they connect again (the Secret is
copied to their files as it changes; supervisor/etcd/tls.py reads them at each new connection).
Each phase remakes every member pod, one at a time, with another pod IP, so the workload follows
the Ready pods as well.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import attrs
from cryptography import x509

from supervisor import pki
from supervisor.etcd import TlsFiles
from supervisor.kube import manifests as m
from supervisor.kube.certificates import trust_of
from tests.harness import images
from tests.harness import members_on_nodes as on
from tests.harness.cluster import Cluster
from tests.harness.formation import form_cluster, kill_operator, run_operator, wait_for
from tests.harness.history import KvWorkload
from tests.harness.node import ROOT
from tests.harness.served_cert import served_certificate

NAME = "rotating"
PHASES = ["CARotationStarted", "CARotationSwitched", "CARotationDropping", "CARotated"]


@attrs.define
class Rotation:
    """The test's cluster as its clients and the test see it."""

    cluster: Cluster
    namespace: str
    tls: TlsFiles
    workload: KvWorkload | None = None

    def secret(self) -> dict[str, str]:
        ref = m.ClusterRef(self.namespace, NAME)
        return dict(self.cluster.get_json("secret", m.tls_secret_name(ref), namespace=self.namespace)["data"])

    def refresh(self) -> dict[str, str]:
        """The clients' files made the Secret's content again (each replaced whole, so a client
        connecting meanwhile reads an old file or a new one), and the workload pointed at the
        Ready members; returns the Secret's data."""
        data = self.secret()
        for key, path in (
            (m.TLS_CA_CERT, self.tls.ca_file),
            (m.TLS_CLIENT_CERT, self.tls.cert_file),
            (m.TLS_CLIENT_KEY, self.tls.key_file),
        ):
            assert path is not None
            content = base64.b64decode(data[key])
            if path.read_bytes() != content:
                fresh = path.with_suffix(".new")
                fresh.write_bytes(content)
                os.replace(fresh, path)
        if self.workload is not None:
            on.follow(self.cluster, self.namespace, NAME, self.workload)
        return data

    def status(self) -> dict[str, Any]:
        self.refresh()
        return dict(self.cluster.get_json("etcdcluster", NAME, namespace=self.namespace).get("status") or {})

    def reasons(self) -> list[str]:
        self.refresh()  # called while waiting: the clients follow the pods meanwhile
        items = self.cluster.get_json("events", namespace=self.namespace)["items"]
        return [e["reason"] for e in items if e["involvedObject"]["kind"] == "EtcdCluster"]

    def rotated(self) -> bool:
        """Running at full size, and status.tls saying the last rotation was of the CA (the
        CARotated Event is written before the status says so)."""
        s = self.status()
        last = ((s.get("tls") or {}).get("lastRotation") or {}).get("kind")
        return s.get("phase") == "Running" and s.get("readyReplicas") == 3 and last == "ca"

    def answers_more(self, what: str, count: int = 20) -> None:
        """Until `count` more operations succeed, following the Secret and the members meanwhile."""
        assert self.workload is not None
        done = self.workload.acknowledged
        wait_for(what, lambda: self.refresh() and self.workload.acknowledged >= done + count, 120, poll=0.5)

    def annotate(self, value: str) -> None:
        self.cluster.kubectl(
            "annotate",
            "-n",
            self.namespace,
            f"etcdcluster/{NAME}",
            f"etcd.io/rotate-ca={value}",
            "--overwrite",
        )


def longest_gap(workload: KvWorkload) -> str:
    """The longest stretch between two answers, as wall-clock times (to line up with the
    operators' logs)."""
    begin, end = on.Gaps(workload).bounds()
    offset = time.time_ns() - time.monotonic_ns()

    def wall(ns: int) -> str:
        return dt.datetime.fromtimestamp((ns + offset) / 1e9, dt.UTC).strftime("%H:%M:%S.%f")[:-3]

    return f"{(end - begin) / 1e9:.2f} s, from {wall(begin)} to {wall(end)}"


def print_steps(logs: Path, namespace: str) -> None:
    """Each operator's steps, with their times (what a failure or a long gap lines up with)."""
    for n in (1, 2):
        log = logs / f"operator-{namespace}-{n}.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        steps = [ln[:160] for ln in lines if "actors.cluster:" in ln]
        print(f"operator {n}'s steps:\n" + "\n".join(steps))


def refused_or_answered(ip: str, cert: Path, key: Path) -> subprocess.CompletedProcess[str]:
    """etcdctl to one member presenting `cert` (the server's certificate not checked: what is
    asked here is whether the member trusts the client)."""
    command: list[str | os.PathLike[str]] = [
        images.default_etcd_dir() / "etcdctl",
        f"--endpoints=https://{ip}:{m.CLIENT_PORT}",
        f"--cert={cert}",
        f"--key={key}",
        "--insecure-skip-tls-verify",
        "--command-timeout=5s",
        "get",
        "any",
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


def test_a_ca_rotation_on_real_pods_survives_an_operator_crash_and_ends_trusting_only_the_new_ca(
    e2e_cluster: Cluster, e2e_namespace: str, operator_image: str, tmp_path: Path
) -> None:
    logs = ROOT / "logs"
    try:
        rotation, old = rotated_with_a_crash(e2e_cluster, e2e_namespace, operator_image, tmp_path)
    finally:
        print_steps(logs, e2e_namespace)
    workload = rotation.workload
    assert workload is not None
    data = rotation.refresh()
    (old_ca,) = pki.load_bundle(base64.b64decode(old[m.TLS_CA_CERT]))
    (new_ca,) = pki.load_bundle(base64.b64decode(data[m.TLS_CA_CERT]))
    assert new_ca != old_ca, "the Secret still trusts the old CA"
    for key in (m.TLS_CERT, m.TLS_CLIENT_CERT):
        assert pki.signed_by(x509.load_pem_x509_certificate(base64.b64decode(data[key])), new_ca), key
    # Every member pod made with the final material, serving a leaf of the new CA, answering the
    # new client pair and refusing the old one (signed by the old CA, trusted no more).
    members = on.live_members(e2e_cluster, e2e_namespace, NAME)
    assert {p["metadata"]["annotations"][m.ANNOTATION_TRUST] for p in members} == {trust_of(data)}
    tls = rotation.tls
    assert tls.ca_file is not None and tls.cert_file is not None and tls.key_file is not None
    old_cert, old_key = tmp_path / "old-client.crt", tmp_path / "old-client.key"
    old_cert.write_bytes(base64.b64decode(old[m.TLS_CLIENT_CERT]))
    old_key.write_bytes(base64.b64decode(old[m.TLS_CLIENT_KEY]))
    for pod in members:
        ip, name = pod["status"]["podIP"], pod["metadata"]["name"]
        served = served_certificate(ip, m.CLIENT_PORT, tls.ca_file, tls.cert_file, tls.key_file)
        assert pki.signed_by(served, new_ca), name
        answered = refused_or_answered(ip, tls.cert_file, tls.key_file)
        assert answered.returncode == 0, (name, answered.stderr)
        # The same member, a moment later, with only the client pair changed. Under TLS 1.3 the
        # member's refusal comes after the handshake: etcdctl sees a broken pipe, not a reason.
        refused = refused_or_answered(ip, old_cert, old_key)
        assert refused.returncode != 0, (name, refused.stdout)
    reasons = rotation.reasons()
    assert set(PHASES) <= set(reasons) and reasons.count("CARotated") == 1, reasons
    operations = workload.history.operations
    failed = [op for op in operations if op.error is not None]
    print(f"\noperations: {len(operations)}, failed (a member restarting): {len(failed)}")
    print(f"longest stretch without an answer: {longest_gap(workload)}")
    on.assert_linearizable(workload, tmp_path / "history")


def rotated_with_a_crash(
    cluster: Cluster, ns: str, operator_image: str, tmp_path: Path
) -> tuple[Rotation, dict[str, str]]:
    """A TLS cluster formed, its CA rotated under load through an operator's SIGKILL; returns the
    rotation (its workload stopped, every key read back) and the Secret's data before it."""

    def operator(n: int) -> contextlib.AbstractContextManager[Path]:
        log = ROOT / "logs" / f"operator-{ns}-{n}.log"
        return run_operator(cluster, ns, ROOT / "operator", log, helper_image=operator_image)

    with contextlib.ExitStack() as stack:
        with operator(1):
            form_cluster(cluster, ns, NAME, tls=True)
            rotation = Rotation(cluster, ns, on.client_tls(cluster, ns, NAME, tmp_path / "tls"))
            old = rotation.secret()
            workload = KvWorkload(
                endpoints=on.endpoints(cluster, ns, NAME), tls=rotation.tls, max_operations=60_000, pause=0.02
            )
            rotation.workload = stack.enter_context(on.background(workload))
            rotation.answers_more("the workload's first answers")
            rotation.annotate("first")
            # Killed once the new CA signs the leaves: a bundle trusted, half the rolls to go.
            wait_for(
                "the rotation's second phase", lambda: "CARotationSwitched" in rotation.reasons(), 300, 1.0
            )
            kill_operator(ns)
        assert "CARotated" not in rotation.reasons()
        # Nobody tends the cluster: it serves on, whatever pod was being remade.
        rotation.answers_more("answers while no operator runs")

        with operator(2):
            wait_for("the rotation finished by the next operator", rotation.rotated, 420, poll=1.0)
            rotation.answers_more("answers after the rotation")
    on.read_back(workload)
    return rotation, old

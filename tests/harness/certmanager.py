"""A real cert-manager for the three-node tier: its controller built from the Go module
github.com/cert-manager/cert-manager (tests/envtest/build-certmanager.sh, `make certmanager`) run
as a process on this host against the nodes' kube-apiserver, as its Deployment runs in a cluster,
and its CRDs from the same module (deploy/crds: plain YAML, applied as they are).

What is left out, on purpose: the webhook (objects are checked by the CRDs' schemas alone; the
test writes only valid ones), the cainjector (no webhook to inject into), leader election (one
process) and every issuer but CA (and the Issuer/ClusterIssuer readiness it needs): the controller
program of tests/envtest/certmanager/main.go registers just those controllers.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from supervisor import pki
from tests.harness.components import MissingComponent
from tests.harness.formation import wait_for
from tests.harness.nodes import ROOT
from tests.harness.procs import stop

BUILD = Path(__file__).resolve().parents[1] / "envtest" / "build-certmanager.sh"
GO_MOD = BUILD.parent / "certmanager" / "go.mod"
CRDS = ("certificates", "certificaterequests", "issuers", "clusterissuers")


def cert_manager_dir() -> Path:
    """The cache directory build-certmanager.sh fills for the pinned version; never built from a test."""
    version = next(
        line.split()[2]
        for line in GO_MOD.read_text().splitlines()
        if line.startswith("require github.com/cert-manager/cert-manager ")
    )
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    out = cache / "etcd-supervisor" / "cert-manager" / version
    if not (out / "cert-manager").exists() or not (out / "crds").is_dir():
        raise MissingComponent(f"cert-manager {version} not built ({out}): run `make certmanager`")
    return out


class Api(Protocol):
    """The nodes' control plane (tests/harness/nodes.py) or the kube tier's API server."""

    @property
    def kubeconfig(self) -> Path: ...

    def kubectl(self, *args: Any, **kw: Any) -> subprocess.CompletedProcess[str]: ...


@contextlib.contextmanager
def running_cert_manager(nodes: Api, built: Path, log: Path | None = None) -> Iterator[Path]:
    """cert-manager's CRDs applied and its controller running with the admin kubeconfig (on the
    nodes it lives under their ROOT, so the nodes' cleanup finds a leftover process by its
    command line); yields its log (by default with the nodes' logs)."""
    for name in CRDS:
        nodes.kubectl("apply", "--server-side", "-f", built / "crds" / f"cert-manager.io_{name}.yaml")
    for name in CRDS:
        nodes.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}.cert-manager.io")
    log = log or ROOT / "logs" / "cert-manager.log"
    cmd = [
        str(built / "cert-manager"),
        f"--kubeconfig={nodes.kubeconfig}",
        "--cluster-resource-namespace=default",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(
            "cert-manager's controllers running",
            lambda: proc.poll() is None and b"cert-manager controllers running" in log.read_bytes(),
            60,
        )
        yield log
    finally:
        stop(proc)


def ca_issuer(nodes: Api, namespace: str, name: str, ca: pki.KeyPair) -> None:
    """A CA Issuer signing with `ca` (its key pair in a Secret), Ready."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-key-pair"},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(ca.cert_pem()).decode(),
            "tls.key": base64.b64encode(ca.key_pem()).decode(),
        },
    }
    issuer: dict[str, Any] = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": {"name": name},
        "spec": {"ca": {"secretName": f"{name}-key-pair"}},
    }
    nodes.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(secret))
    nodes.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(issuer))
    nodes.kubectl(
        "wait", "--for=condition=Ready", f"issuer/{name}", "-n", namespace, "--timeout=60s", timeout=90
    )


def renew(nodes: Api, namespace: str, certificate: str) -> None:
    """Ask cert-manager to issue `certificate` again now, as `cmctl renew` does: the condition
    Issuing=True (reason ManuallyTriggered) added through the status subresource."""
    patch = [
        {
            "op": "add",
            "path": "/status/conditions/-",
            "value": {
                "type": "Issuing",
                "status": "True",
                "reason": "ManuallyTriggered",
                "message": "Certificate re-issuance manually triggered",
            },
        }
    ]
    nodes.kubectl(
        "patch",
        "certificate",
        certificate,
        "-n",
        namespace,
        "--subresource=status",
        "--type=json",
        "-p",
        json.dumps(patch),
    )

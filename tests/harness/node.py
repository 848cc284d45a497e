"""A real one-node Kubernetes for the e2e tier: real pods in their own network namespaces.

kube-apiserver and its etcd come from tests/harness/kube.py (extended: Node+RBAC authorization,
admission with controllers behind it, a serving certificate also valid from inside pods);
kube-controller-manager, kube-scheduler, kubelet, kube-proxy and CoreDNS from
tests/envtest/build-node.sh; containerd, runc and the CNI plugins from Debian. No Docker
engine, no registry: images are imported from tarballs (tests/harness/images.py).

Everything lives under one fixed directory (ROOT) with names of its own (bridge ``e2ebr0``,
cgroup root ``/etcd-supervisor-e2e``), so ``cleanup()`` can remove what a crashed run left
behind before a new node starts, and after it stops: no process, mount, bridge, network
namespace, cgroup, iptables rule or route of ours stays.

Network: pods get 10.244.0.0/24 on the bridge, whose gateway 10.244.0.1 is this host. Pods
have no default route (only the pod and Service ranges), and a FORWARD rule drops whatever
would leave the bridge for another interface: pod traffic stays inside this machine. CoreDNS
serves cluster.local on 10.244.0.1:53 (the kubelet's clusterDNS); kube-proxy (iptables) makes
ClusterIP Services work, from pods and from this host. Member PVCs are provisioned by the
controller-manager's own hostPath provisioner (the default StorageClass ``hostpath``).

API
---
``require_node_binaries() -> Path``     the directory of the node binaries (skip / CI failure)
``open_node() -> contextmanager[Node]``  cleanup, start, yield, stop, cleanup
``Node``  ``.api`` (the KubeAPIServer: ``.kubeconfig``, ``.kubectl``, ...), ``.kubeconfig``,
          ``.start_seconds``, ``.import_image(archive)``, ``.cluster_dns_command(cmd)``
``cleanup()``                            idempotent; safe with nothing to clean
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
import yaml

from tests.harness import images
from tests.harness.components import MissingComponent, require
from tests.harness.kube import (
    REPO,
    KubeAPIServer,
    _free_port,
    _spawn,
    _terminate,
    require_binaries,
)
from tests.harness.poll import until

BUILD_SCRIPT = REPO / "tests" / "envtest" / "build-node.sh"
ROOT = Path("/tmp/etcd-supervisor-e2e")
# The in-tree hostPath provisioner always provisions here (and deletes only under /tmp).
HOSTPATH_PV_DIR = Path("/tmp/hostpath_pv")
LOCK = Path("/tmp/etcd-supervisor-e2e.lock")
LOGS = Path("/tmp/etcd-supervisor-e2e-logs")  # the last node's logs, kept after cleanup
NODE_NAME = "e2e-node"
BRIDGE = "e2ebr0"
GATEWAY = "10.244.0.1"
POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.96.0.0/16"  # kube.py's --service-cluster-ip-range
KUBERNETES_SERVICE_IP = "10.96.0.1"
CGROUP_ROOT = "etcd-supervisor-e2e"
CLUSTER_DOMAIN = "cluster.local"
FORWARD_RULE = [
    "FORWARD",
    "-i",
    BRIDGE,
    "!",
    "-o",
    BRIDGE,
    "-m",
    "comment",
    "--comment",
    "etcd-supervisor-e2e: pod traffic stays on this machine",
    "-j",
    "DROP",
]


def find_node_binaries() -> Path:
    if os.geteuid() != 0:
        raise MissingComponent("a real node needs root (containerd, network namespaces, cgroups)")
    try:
        out = subprocess.run(
            [str(BUILD_SCRIPT)], capture_output=True, text=True, check=True, timeout=3600
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        detail = (getattr(exc, "stderr", "") or str(exc)).strip()
        last = detail.splitlines()[-1] if detail else str(exc)
        raise MissingComponent(f"node binaries unavailable (tests/envtest/build-node.sh: {last})") from exc
    return Path(out.splitlines()[-1])


def require_node_binaries() -> Path:
    return require("node binaries", find_node_binaries)


def _run(*cmd: str | os.PathLike[str], check: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=check, timeout=120)


# --- cleanup: robust to a crashed previous run -----------------------------------------------


def _our_pids(root: Path = ROOT) -> list[int]:
    """Processes whose command line names ``root`` (every component and containerd's shims)."""
    pids = []
    marker = str(root).encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
    return pids


def _cgroup_dirs(name: str = CGROUP_ROOT) -> list[Path]:
    """Our cgroups (under ``name``) in every v1 hierarchy (and v2), deepest first."""
    found: list[Path] = []
    base = Path("/sys/fs/cgroup")
    tops = [base / name, *(d / name for d in base.iterdir() if d.is_dir())]
    for top in tops:
        if top.is_dir():
            found += [Path(p) for p, _, _ in os.walk(top)]
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def _kill(pids: Sequence[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _our_mounts(root: Path = ROOT) -> list[str]:
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith((str(root), str(HOSTPATH_PV_DIR), "/run/netns/cni-", "/var/run/netns/cni-")):
            mounts.append(point)
    return sorted(set(mounts), key=len, reverse=True)


def cleanup() -> None:
    """Remove every trace of a node, running or crashed. Idempotent."""
    for _ in range(10):  # processes first, or they would recreate what follows
        pids = _our_pids() + [
            int(p)
            for d in _cgroup_dirs()
            for p in (d / "cgroup.procs").read_text().split()
            if (d / "cgroup.procs").exists()
        ]
        if not pids:
            break
        _kill(pids)
        time.sleep(0.3)
    for d in _cgroup_dirs():
        with contextlib.suppress(OSError):
            d.rmdir()
    for point in _our_mounts():
        _run("umount", "-l", point)
    # containerd's CRI pins pod network namespaces under /run/netns, named cni-<uuid>.
    for ns in Path("/run/netns").glob("cni-*") if Path("/run/netns").is_dir() else []:
        _run("ip", "netns", "delete", ns.name)
    # containerd 1.6 puts shim sockets here whatever its state dir; remove it once empty.
    for d in (Path("/run/containerd/s"), Path("/run/containerd")):
        with contextlib.suppress(OSError):
            d.rmdir()
    # A pod's host-side veth normally dies with its namespace; one whose namespace lingers
    # (the kernel frees them lazily after a crash) is cut loose here.
    for line in _run("ip", "-o", "link", "show", "master", BRIDGE).stdout.splitlines():
        _run("ip", "link", "delete", line.split(":")[1].strip().split("@")[0])
    _run("ip", "link", "delete", BRIDGE)
    _run("ip", "route", "delete", SERVICE_CIDR, "dev", BRIDGE)
    while _run("iptables", "-D", *FORWARD_RULE).returncode == 0:
        pass
    _remove_chains()
    if not _our_mounts():  # never rm -rf through a mount into the host's files
        if ROOT.is_dir():  # the logs outlive the node, for a look after a failure
            shutil.rmtree(LOGS, ignore_errors=True)
            shutil.copytree(
                ROOT,
                LOGS,
                ignore=lambda d, names: [
                    n for n in names if not (n.endswith(".log") or (Path(d) / n).is_dir())
                ],
                ignore_dangling_symlinks=True,
                symlinks=True,
            )
        shutil.rmtree(ROOT, ignore_errors=True)
        shutil.rmtree(HOSTPATH_PV_DIR, ignore_errors=True)
    forward = ROOT.parent / "etcd-supervisor-e2e.ip_forward"
    if forward.exists():  # put back what the host had before the node set it
        Path("/proc/sys/net/ipv4/ip_forward").write_text(forward.read_text())
        forward.unlink()


def _remove_chains() -> None:
    """The kubelet's, kube-proxy's and the CNI plugins' iptables chains (KUBE-*, CNI-*): the
    jumps into them first, then the chains themselves."""
    ours = ("KUBE-", "CNI-")
    for tool in ("iptables", "ip6tables"):
        table = ""
        chains: list[tuple[str, str]] = []
        for line in _run(f"{tool}-save").stdout.splitlines():
            if line.startswith("*"):
                table = line[1:]
            elif line.startswith(":") and line[1:].startswith(ours):
                chains.append((table, line[1:].split()[0]))
            elif (
                line.startswith("-A ")
                and not line.split()[1].startswith(ours)
                and line.partition(" -j ")[2].startswith(ours)
            ):
                _run("sh", "-c", f"{tool} -t {table} -D {line[3:]}")
        for table, chain in chains:
            _run(tool, "-t", table, "-F", chain)
        for table, chain in chains:
            _run(tool, "-t", table, "-X", chain)


def leftovers() -> list[str]:
    """What cleanup() should have removed and did not (empty when clean): for tests and humans."""
    out = [f"process {pid}" for pid in _our_pids()]
    out += [f"mount {m}" for m in _our_mounts()]
    out += [f"cgroup {d}" for d in _cgroup_dirs()]
    if _run("ip", "link", "show", BRIDGE).returncode == 0:
        out.append(f"bridge {BRIDGE}")
    out += [
        f"link {line.split(':')[1].strip()}"
        for line in _run("ip", "-o", "link").stdout.splitlines()
        if ": veth" in line
    ]
    if Path("/run/netns").is_dir():
        out += [f"netns {p.name}" for p in Path("/run/netns").glob("cni-*")]
    if any(
        word in _run(f"{tool}-save").stdout
        for tool in ("iptables", "ip6tables")
        for word in (":KUBE-", ":CNI-", "etcd-supervisor-e2e")
    ):
        out.append("iptables rules")
    return out


# --- the node -----------------------------------------------------------------------------------


def containerd_config(c: Path, socket: Path, cni_conf_dir: Path, *, netns_under_state: bool = False) -> str:
    """containerd's config: root, state, sockets and runc root under ``c``; CNI from ``cni_conf_dir``.
    ``netns_under_state`` pins pod network namespaces under the state directory instead of
    /run/netns/cni-*, so that they are told apart from another node's."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    netns = "\n  netns_mounts_under_state_dir = true" if netns_under_state else ""
    return f"""version = 2
root = "{c / "root"}"
state = "{c / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{c / "opt"}"
[{cri}]
  sandbox_image = "{images.PAUSE_IMAGE}"
  # Without it runc fails ("can't get final child's PID from pipe: EOF"): a sandbox may not
  # lower its oom_score_adj on this machine.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"{netns}
[{cri}.containerd]
  default_runtime_name = "runc"
  snapshotter = "overlayfs"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{c / "runc"}"
[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{cni_conf_dir}"
"""


def kubelet_config(
    *, cgroup_root: str, endpoint: str, cluster_dns: str, resolv_conf: Path, pod_cidr: str, port: int
) -> dict[str, object]:
    """A KubeletConfiguration for a test node (cgroupfs, no swap check, low eviction thresholds)."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # The API server reaches logs/exec without a client certificate: a test node only.
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": cgroup_root,
        # These machines' hosts run cgroup v1 (not ours to change); kubelets from 1.35 on refuse
        # it unless told (production nodes run cgroup v2, where this is moot).
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": endpoint,
        "imageServiceEndpoint": endpoint,
        "clusterDomain": CLUSTER_DOMAIN,
        "clusterDNS": [cluster_dns],
        "resolvConf": str(resolv_conf),
        "podCIDR": pod_cidr,
        "address": "0.0.0.0",
        "port": port,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        # Never garbage-collect the imported images: nothing could pull them back.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "nodeStatusUpdateFrequency": "2s",
        "syncFrequency": "5s",
    }


def make_cgroup_root(name: str) -> None:
    """``/name`` in every hierarchy: the kubelet wants its cgroup root to exist in each, and
    cpuset needs CPUs and memory nodes at every level before anything can join it."""
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        if not hierarchy.is_dir():
            continue
        parent = hierarchy
        for part in Path(name).parts:
            child = parent / part
            if not child.exists():
                child.mkdir()
                for f in ("cpuset.cpus", "cpuset.mems"):
                    if (parent / f).exists():
                        (child / f).write_text((parent / f).read_text())
            parent = child


@attrs.define
class NodeAPIServer(KubeAPIServer):
    """kube.py's server, as a real cluster's: Node+RBAC, all admission, reachable from pods."""

    node_token: str = attrs.field(factory=lambda: secrets.token_hex(16))

    def _serving_ips(self) -> list[str]:
        return [*super()._serving_ips(), GATEWAY, KUBERNETES_SERVICE_IP]

    def _token_lines(self) -> list[str]:
        return [*super()._token_lines(), f'{self.node_token},system:node:{NODE_NAME},node-uid,"system:nodes"']

    def _apiserver_args(self) -> list[str | Path]:
        # Controllers run here, so the admission plugins kube.py turns off can stay on.
        dropped = (
            "--authorization-mode",
            "--disable-admission-plugins",
            "--endpoint-reconciler-type",
            "--bind-address",
            "--advertise-address",
        )
        args = [a for a in super()._apiserver_args() if not str(a).startswith(dropped)]
        return [
            *args,
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            # Pods reach it through the kubernetes Service, whose endpoint is the bridge gateway.
            "--bind-address=0.0.0.0",
            f"--advertise-address={GATEWAY}",
            # logs/exec: the node's name resolves nowhere; its InternalIP is the gateway.
            "--kubelet-preferred-address-types=InternalIP",
        ]


@attrs.define
class Node:
    bin_dir: Path
    api: NodeAPIServer
    start_seconds: float = 0.0
    procs: dict[str, subprocess.Popen[bytes]] = attrs.field(factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.api.kubeconfig

    @property
    def containerd_socket(self) -> Path:
        return ROOT / "containerd" / "containerd.sock"

    def log(self, name: str) -> Path:
        return ROOT / "logs" / f"{name}.log"

    # --- start ---

    def start(self) -> None:
        began = time.monotonic()
        (ROOT / "logs").mkdir(parents=True, exist_ok=True)
        self._network()
        self.api.start()
        admin = self.api.kubeconfig
        self._start_containerd()
        self._import_base_images()
        # Before the controller-manager: it maps kinds from discovery at start and refreshes only
        # every 30 s, and until then a member PodDisruptionBudget (whose pods' owner is an
        # EtcdCluster) fails to sync with "no matches for kind EtcdCluster" and allows nothing.
        self.api.apply_crds()
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={admin}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={_free_port()}",
                "--use-service-account-credentials=false",
                f"--service-account-private-key-file={self.api.pki / 'sa.key'}",
                f"--root-ca-file={self.api.ca_file}",
                # No node IPAM: the pod range is the CNI config's, not per-node.
                "--controllers=*,-nodeipam",
                f"--cluster-cidr={POD_CIDR}",
                "--enable-hostpath-provisioner=true",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                f"--kubeconfig={admin}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={_free_port()}",
            ],
        )
        self._start_kubelet()
        self._spawn(
            "kube-proxy",
            [
                f"--kubeconfig={admin}",
                f"--hostname-override={NODE_NAME}",
                "--proxy-mode=iptables",
                f"--cluster-cidr={POD_CIDR}",
                f"--healthz-bind-address=127.0.0.1:{_free_port()}",
                f"--metrics-bind-address=127.0.0.1:{_free_port()}",
                # Leave the host's conntrack sysctls alone.
                "--conntrack-max-per-core=0",
            ],
        )
        self._start_coredns()
        self._wait_node_ready()
        self.api.kubectl("apply", "-f", "-", input=STORAGE_CLASS)
        self.start_seconds = time.monotonic() - began

    def _network(self) -> None:
        """The bridge exists before the kubelet (its node IP) and CoreDNS (its listen address)."""
        forward = Path("/proc/sys/net/ipv4/ip_forward")
        (ROOT.parent / "etcd-supervisor-e2e.ip_forward").write_text(forward.read_text())
        forward.write_text("1")  # Service traffic from a pod is DNATed and routed back by this host
        _run("ip", "link", "add", BRIDGE, "type", "bridge", check=True)
        _run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE, check=True)
        _run("ip", "link", "set", BRIDGE, "up", check=True)
        # Connects to ClusterIPs from this host get a route (kube-proxy's DNAT then applies);
        # anything not DNATed stays on the bridge instead of following the default route out.
        _run("ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE, check=True)
        _run("iptables", "-I", *FORWARD_RULE, check=True)
        cni = ROOT / "cni" / "net.d"
        cni.mkdir(parents=True)
        conflist = {
            "cniVersion": "1.0.0",
            "name": "e2e",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "hairpinMode": True,
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                        # No default route: only Services go through the gateway.
                        "routes": [{"dst": SERVICE_CIDR}],
                        "dataDir": str(ROOT / "cni" / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }
        (cni / "10-e2e.conflist").write_text(json.dumps(conflist, indent=1))

    def _start_containerd(self) -> None:
        c = ROOT / "containerd"
        config = containerd_config(c, self.containerd_socket, ROOT / "cni" / "net.d")
        c.mkdir(parents=True, exist_ok=True)
        (c / "config.toml").write_text(config)
        proc = self._spawn(
            "containerd", [f"--config={c / 'config.toml'}"], binary=Path("/usr/bin/containerd")
        )
        self._wait(
            lambda: _run("ctr", f"--address={self.containerd_socket}", "version").returncode == 0,
            proc,
            "containerd",
            60,
        )

    def _import_base_images(self) -> None:
        self.import_image(images.pause_archive(ROOT / "images"))

    def import_image(self, archive: Path) -> None:
        images.import_archive(archive, address=self.containerd_socket)

    def _start_kubelet(self) -> None:
        make_cgroup_root(CGROUP_ROOT)
        k = ROOT / "kubelet"
        k.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.api.write_kubeconfig(
            k / "kubelet.kubeconfig", token=self.api.node_token, user="kubelet"
        )
        (k / "resolv.conf").write_text("")  # pods get cluster DNS only, never the host's resolvers
        endpoint = f"unix://{self.containerd_socket}"
        config = kubelet_config(
            cgroup_root=f"/{CGROUP_ROOT}",
            endpoint=endpoint,
            cluster_dns=GATEWAY,
            resolv_conf=k / "resolv.conf",
            pod_cidr=POD_CIDR,
            port=_free_port(),
        )
        (k / "config.yaml").write_text(yaml.safe_dump(config))
        self._spawn(
            "kubelet",
            [
                f"--config={k / 'config.yaml'}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={k / 'root'}",
                f"--cert-dir={k / 'pki'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={GATEWAY}",
                "--v=2",
            ],
        )

    def _start_coredns(self) -> None:
        ready = _free_port()
        corefile = ROOT / "coredns" / "Corefile"
        corefile.parent.mkdir(parents=True, exist_ok=True)
        # Pod records on (the operator resolves members by name, etcd checks peers by address);
        # TTL 0: a member's record must change the moment its pod does.
        corefile.write_text(f"""{CLUSTER_DOMAIN}:53 in-addr.arpa:53 {{
    bind {GATEWAY}
    errors
    ready 127.0.0.1:{ready}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa {{
        kubeconfig {self.api.kubeconfig} admin
        pods insecure
        ttl 0
    }}
}}
""")
        proc = self._spawn("coredns", [f"-conf={corefile}"])
        self._wait(lambda: _http_ok(f"http://127.0.0.1:{ready}/ready"), proc, "coredns", 60)

    def _wait_node_ready(self, timeout: float = 120) -> None:
        def ready() -> bool:
            out = self.api.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
            if out.returncode:
                return False
            conds = json.loads(out.stdout)["status"].get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        self._wait(ready, self.procs["kubelet"], "kubelet (node Ready)", timeout)

    def _spawn(self, name: str, args: list[str], binary: Path | None = None) -> subprocess.Popen[bytes]:
        proc = _spawn([binary or self.bin_dir / name, *args], self.log(name))
        self.procs[name] = proc
        return proc

    def _wait(self, ready: object, proc: subprocess.Popen[bytes], what: str, timeout: float) -> None:
        KubeAPIServer._wait(ready, proc, self.log(what.split()[0]), what, timeout)

    # --- use ---

    def cluster_dns_command(self, cmd: Sequence[str | os.PathLike[str]]) -> list[str]:
        """``cmd`` run on this host but resolving names through cluster DNS, as a pod does.

        A mount namespace of its own sees a resolv.conf naming CoreDNS; the host's stays as it
        is. For a process outside the cluster that must reach members by their DNS names.
        """
        resolv = ROOT / "host-resolv.conf"
        resolv.write_text(f"nameserver {GATEWAY}\noptions timeout:1 attempts:2\n")
        script = f'mount --bind {resolv} /etc/resolv.conf && exec "$@"'
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
            *(str(c) for c in cmd),
        ]

    # --- stop ---

    def stop(self) -> None:
        # No graceful pod deletion: everything here is thrown away, and cleanup() removes
        # containers, sandboxes, mounts and namespaces in seconds (a graceful delete of every
        # pod took ~35 s).
        for name in (
            "kube-proxy",
            "coredns",
            "kube-scheduler",
            "kube-controller-manager",
            "kubelet",
            "containerd",
        ):
            _terminate(self.procs.pop(name, None), grace=10)
        self.api.stop()


def _http_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


STORAGE_CLASS = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: hostpath
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
"""


@contextlib.contextmanager
def _node_lock(timeout: float = 1200.0) -> Iterator[None]:
    """One node per machine (fixed paths, bridge, DNS address): a second test run waits here
    until the first one's node is gone. The three-node harness (nodes.py) takes it too: both
    program the host's iptables. The kernel drops the lock if its holder dies."""
    with LOCK.open("w") as f:

        def locked() -> bool:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        try:
            until(locked, within=timeout, every=1, what="the e2e node's lock")
        except TimeoutError:
            raise MissingComponent(f"another test run held the e2e node for {timeout:.0f}s") from None
        yield


@contextlib.contextmanager
def open_node() -> Iterator[Node]:
    """A started node; stopped and cleaned up on exit, whatever happened."""
    bin_dir = require_node_binaries()
    binaries = require_binaries()
    with _node_lock():
        cleanup()
        ROOT.mkdir(parents=True)
        node = Node(bin_dir=bin_dir, api=NodeAPIServer(binaries=binaries, work_dir=ROOT / "kube-apiserver"))
        node.api.work_dir.mkdir(parents=True)

        def stop() -> None:
            node.stop()
            cleanup()

        atexit.register(stop)
        try:
            node.start()
            yield node
        finally:
            stop()
            atexit.unregister(stop)


__all__ = ["Node", "cleanup", "leftovers", "open_node", "require_node_binaries"]

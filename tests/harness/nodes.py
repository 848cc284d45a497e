"""A real three-node Kubernetes for the multi-node tier (issue 28): one control plane, three nodes.

kind runs each node as a container; without Docker, a node here is a network namespace
(``e2en-a``, ``e2en-b``, ``e2en-c``) with a veth into a host bridge of its own (``e2enbr0``,
10.245.0.0/24; the host is 10.245.0.1, node i is 10.245.0.1i), holding its own containerd (own
root, state and socket), kubelet (``--hostname-override``, own ``--root-dir``, ``--node-ip``, own
cgroup root ``/etcd-supervisor-nodes/<zone>``) and kube-proxy, all entered with ``nsenter --net``
only: they share the host's mount namespace, so the kubelet's volume mounts are the ones
containerd hands to containers. Each node's pods are bridged inside its namespace on a podCIDR
of its own (10.246.i.0/24); nodes route to each other's podCIDRs directly over the host bridge,
and the host routes to each podCIDR via the node's address. Nodes have no default route:
nothing a pod sends leaves this machine.

The control plane (etcd, kube-apiserver, controller-manager, scheduler) runs on the host, as
tests/harness/node.py starts it, and so do CoreDNS (kubeadm's configuration: ttl 30, cluster.local
not cached; pods reach it through the kube-dns ClusterIP 10.96.0.10, as on kubeadm's clusters)
and a kube-proxy of its own so that ClusterIPs work from the host too. Nodes are
labelled ``topology.kubernetes.io/zone=a|b|c``. Volumes are node-local, as on bare metal: the
default StorageClass ``local-node`` has no provisioner; the harness makes ``volumes_per_node`` PVs
per node ahead of time (a directory under the node's own, nodeAffinity to that node), which the
scheduler binds where a claim's pod lands (WaitForFirstConsumer). A member's data cannot follow
it to another node. ``recycle_local_volumes()`` makes Released ones Available again, emptied.

Node operations: ``stop(name)`` freezes the node's pods (cgroup freezer: they keep their state
and answer nothing) and kills its kubelet, kube-proxy and containerd; ``start(name)`` thaws the
pods and starts the three again (containerd finds its running shims). ``partition(name)`` drops
everything in and out of the node's veth inside its namespace (raw PREROUTING for what arrives,
mangle POSTROUTING for what leaves, ahead of any ACCEPT of kube-proxy's); ``both_ways=False``
drops only what arrives. ``heal(name)`` removes those rules.

It takes node.py's lock (the two tiers serialize on one machine) and has names, paths, addresses
and a cgroup root of its own. ``cleanup()`` removes whatever a run, crashed or not, left behind;
``leftovers()`` lists what remains.

API
---
``open_nodes(count=3, policy_engine=None) -> contextmanager[Nodes]``  cleanup, start, yield, stop,
           cleanup; with ``policy_engine`` (kube-router) NetworkPolicies are enforced on each node
``Nodes``  ``.api``, ``.kubeconfig``, ``.kubectl(...)``, ``.names``, ``.start_seconds``,
           ``.wait_policy_engines()``,
           ``.import_image(archive)``, ``.stop(name)``, ``.start(name)``, ``.partition(name,
           both_ways=True)``, ``.heal(name)``, ``.cluster_dns_command(cmd)``,
           ``.add_local_volumes(per_node)``, ``.recycle_local_volumes()``
``cleanup()``, ``leftovers() -> list[str]``
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
import yaml

from tests.harness import images, netpol
from tests.harness import node as one_node
from tests.harness.kube import KubeAPIServer, _free_port, _spawn, _terminate, require_binaries
from tests.harness.node import (
    CLUSTER_DOMAIN,
    KUBERNETES_SERVICE_IP,
    SERVICE_CIDR,
    NodeAPIServer,
    _cgroup_dirs,
    _http_ok,
    _kill,
    _node_lock,
    _our_pids,
    _remove_chains,
    _run,
    containerd_config,
    kubelet_config,
    make_cgroup_root,
    require_node_binaries,
)
from tests.harness.poll import until

ROOT = Path("/tmp/etcd-supervisor-nodes")
LOGS = Path("/tmp/etcd-supervisor-logs-nodes")  # the last run's logs, kept after cleanup
BRIDGE = "e2enbr0"
HOST_IP = "10.245.0.1"
NODE_PREFIX = "e2en-"  # node names and their network namespaces
HOST_VETH_PREFIX = "e2env"
CLUSTER_CIDR = "10.246.0.0/16"
CGROUP_ROOT = "etcd-supervisor-nodes"
ZONES = "abcdefgh"
NODE_VETH = "eth0"  # the node's side of its veth, inside its namespace
# What the node lifecycle controller taints a node with while it is NotReady or unreachable.
NODE_AWAY_TAINTS = frozenset({"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"})
KUBELET_PORT = 10250  # each kubelet has a network namespace, so all can use the usual port
DNS_SERVICE_IP = "10.96.0.10"  # kubeadm's kube-dns ClusterIP, the pods' nameserver
LOCAL_CLASS = "local-node"
VOLUME_SIZE = "10Gi"  # an EtcdCluster's default spec.storage.size

# The pods' nameserver is a ClusterIP, as on kubeadm's clusters (so DNS goes through each node's
# kube-proxy); its one endpoint is CoreDNS on this host (the endpoint mirroring controller makes
# the EndpointSlice kube-proxy reads).
DNS_SERVICE = f"""
apiVersion: v1
kind: Service
metadata: {{name: kube-dns, namespace: kube-system, labels: {{k8s-app: kube-dns}}}}
spec:
  clusterIP: {DNS_SERVICE_IP}
  ports:
  - {{name: dns, port: 53, protocol: UDP, targetPort: 53}}
  - {{name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}}
---
apiVersion: v1
kind: Endpoints
metadata: {{name: kube-dns, namespace: kube-system, labels: {{k8s-app: kube-dns}}}}
subsets:
- addresses: [{{ip: {HOST_IP}}}]
  ports:
  - {{name: dns, port: 53, protocol: UDP}}
  - {{name: dns-tcp, port: 53, protocol: TCP}}
"""

# As bare-metal clusters have it (sig-storage's local static provisioner): PVs made ahead of time
# on each node, bound only once the scheduler has placed the claim's pod. The default class here.
LOCAL_STORAGE_CLASS = f"""
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: {LOCAL_CLASS}
  annotations: {{storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
"""


@attrs.frozen
class NodeSpec:
    """Where one node lives: its names and addresses, all derived from its index (1-based)."""

    index: int

    @property
    def zone(self) -> str:
        return ZONES[self.index - 1]

    @property
    def name(self) -> str:  # the Node's name and its network namespace's
        return f"{NODE_PREFIX}{self.zone}"

    @property
    def ip(self) -> str:
        return f"10.245.0.{10 + self.index}"

    @property
    def pod_cidr(self) -> str:
        return f"10.246.{self.index}.0/24"

    @property
    def pod_gateway(self) -> str:
        return f"10.246.{self.index}.1"

    @property
    def host_veth(self) -> str:
        return f"{HOST_VETH_PREFIX}{self.zone}"

    @property
    def dir(self) -> Path:
        return ROOT / self.name

    @property
    def cgroup(self) -> str:
        return f"{CGROUP_ROOT}/{self.zone}"

    @property
    def containerd_socket(self) -> Path:
        return self.dir / "containerd" / "containerd.sock"

    def volume_path(self, i: int) -> Path:
        return self.dir / "volumes" / f"pv-{i}"


def local_volume(spec: NodeSpec, i: int, storage_class: str = LOCAL_CLASS) -> dict[str, object]:
    """A PV on the node's own directory, usable only by pods on that node (its nodeAffinity)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{spec.name}-pv-{i}", "labels": {"e2en/node": spec.name}},
        "spec": {
            "capacity": {"storage": VOLUME_SIZE},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "local": {"path": str(spec.volume_path(i))},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [spec.name]}
                            ]
                        }
                    ]
                }
            },
        },
    }


def _in_netns(name: str) -> list[str]:
    """A command prefix entering only the node's network namespace (mounts stay the host's)."""
    return ["nsenter", f"--net=/run/netns/{name}", "--"]


def _netns_run(name: str, *cmd: str) -> subprocess.CompletedProcess[str]:
    return _run(*_in_netns(name), *cmd, check=True)


# --- cleanup: robust to a crashed previous run -----------------------------------------------


def _our_mounts() -> list[str]:
    """Mounts under ROOT (volumes, the pods' network namespaces); not node.py's
    /run/netns/cni-*, which a crashed one-node run may have left for its own cleanup."""
    mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
    points = {line.split()[4].replace("\\040", " ") for line in mountinfo}
    return sorted((p for p in points if p == str(ROOT) or p.startswith(f"{ROOT}/")), key=len, reverse=True)


def _freezer_dirs() -> list[Path]:
    return [d for d in _cgroup_dirs(CGROUP_ROOT) if (d / "freezer.state").exists()]


def _our_netns() -> list[str]:
    """The nodes' namespaces (the pods' are pinned under each containerd's state directory,
    apart from node.py's /run/netns/cni-*)."""
    run = Path("/run/netns")
    names = [p.name for p in run.iterdir()] if run.is_dir() else []
    return sorted(n for n in names if n.startswith(NODE_PREFIX))


def _host_veths() -> list[str]:
    out = _run("ip", "-o", "link").stdout.splitlines()
    names = [line.split(":")[1].strip().split("@")[0] for line in out]
    return [n for n in names if n.startswith(HOST_VETH_PREFIX)]


def _kill_all() -> None:
    """Every process of ours: by command line (components, shims) and by cgroup (pods). Frozen
    pods are thawed first: a frozen process does not die of SIGKILL until it is thawed."""
    for d in _freezer_dirs():
        with contextlib.suppress(OSError):
            (d / "freezer.state").write_text("THAWED")
    for _ in range(10):  # processes first, or they would recreate what follows
        pids = _our_pids(ROOT) + [
            int(p)
            for d in _cgroup_dirs(CGROUP_ROOT)
            if (d / "cgroup.procs").exists()
            for p in (d / "cgroup.procs").read_text().split()
        ]
        if not pids:
            return
        _kill(pids)
        time.sleep(0.3)


def cleanup() -> None:
    """Remove every trace of the nodes, running or crashed. Idempotent."""
    _kill_all()
    for d in _cgroup_dirs(CGROUP_ROOT):
        with contextlib.suppress(OSError):
            d.rmdir()
    for point in _our_mounts():
        _run("umount", "-l", point)
    for ns in _our_netns():  # a node's veth pair goes with its namespace
        _run("ip", "netns", "delete", ns)
    for veth in _host_veths():  # one whose namespace the kernel has not freed yet
        _run("ip", "link", "delete", veth)
    _run("ip", "link", "delete", BRIDGE)  # and with it every route through it
    _remove_chains()  # the host kube-proxy's; the nodes' went with their namespaces
    for d in (Path("/run/containerd/s"), Path("/run/containerd")):
        with contextlib.suppress(OSError):
            d.rmdir()
    if not _our_mounts():  # never rm -rf through a mount into the host's files
        _keep_logs()
        shutil.rmtree(ROOT, ignore_errors=True)


def _keep_logs() -> None:
    """The logs outlive the nodes, for a look after a failure."""
    if not (ROOT / "logs").is_dir():
        return
    shutil.rmtree(LOGS, ignore_errors=True)
    shutil.copytree(ROOT / "logs", LOGS)


def leftovers() -> list[str]:
    """What cleanup() should have removed and did not (empty when clean): for tests and humans."""
    out = [f"process {pid}" for pid in _our_pids(ROOT)]
    out += [f"mount {m}" for m in _our_mounts()]
    out += [f"cgroup {d}" for d in _cgroup_dirs(CGROUP_ROOT)]
    out += [f"netns {n}" for n in _our_netns()]
    out += [f"link {v}" for v in _host_veths()]
    if _run("ip", "link", "show", BRIDGE).returncode == 0:
        out.append(f"bridge {BRIDGE}")
    routes = _run("ip", "route").stdout.splitlines()
    out += [f"route {r}" for r in routes if BRIDGE in r or r.startswith(("10.245.", "10.246."))]
    rules = "".join(_run(f"{tool}-save").stdout for tool in ("iptables", "ip6tables"))
    if any(word in rules for word in (":KUBE-", ":CNI-")):
        out.append("iptables chains KUBE-*/CNI-*")
    if ROOT.exists():
        out.append(f"directory {ROOT}")
    return out


# --- the control plane ---------------------------------------------------------------------


@attrs.define
class NodesAPIServer(NodeAPIServer):
    """node.py's server, advertised on the nodes' bridge, with one kubelet identity per node
    (the Node authorizer and NodeRestriction keep each kubelet to its own Node)."""

    node_names: tuple[str, ...] = ()
    node_tokens: dict[str, str] = attrs.field(factory=dict)

    def _serving_ips(self) -> list[str]:
        return ["127.0.0.1", HOST_IP, KUBERNETES_SERVICE_IP]

    def _token_lines(self) -> list[str]:
        lines = KubeAPIServer._token_lines(self)
        for name in self.node_names:
            token = self.node_tokens.setdefault(name, os.urandom(16).hex())
            lines.append(f'{token},system:node:{name},{name}-uid,"system:nodes"')
        return lines

    def _apiserver_args(self) -> list[str | Path]:
        args = [a for a in super()._apiserver_args() if not str(a).startswith("--advertise-address")]
        return [*args, f"--advertise-address={HOST_IP}"]

    def netns_kubeconfig(self, path: Path, *, token: str, user: str) -> Path:
        """A kubeconfig for a component inside a node's namespace, where 127.0.0.1 is not the host."""
        self.write_kubeconfig(path, token=token, user=user)
        path.write_text(path.read_text().replace("https://127.0.0.1:", f"https://{HOST_IP}:"))
        return path


# --- network ---------------------------------------------------------------------------------


def _host_network() -> None:
    """The bridge the nodes' veths join; the host's address on it serves the API and DNS."""
    _run("ip", "link", "add", BRIDGE, "type", "bridge", check=True)
    _run("ip", "addr", "add", f"{HOST_IP}/24", "dev", BRIDGE, check=True)
    _run("ip", "link", "set", BRIDGE, "up", check=True)
    # ClusterIPs from this host: the host kube-proxy's DNAT applies once a route exists.
    _run("ip", "route", "add", SERVICE_CIDR, "dev", BRIDGE, check=True)


def _node_network(node: NodeSpec, peers: Sequence[NodeSpec]) -> None:
    """The node's namespace, its veth into the bridge, and routes to every podCIDR."""
    _run("ip", "netns", "add", node.name, check=True)
    _run(
        "ip", "link", "add", node.host_veth, "type", "veth", "peer", "name", NODE_VETH, "netns", node.name,
        check=True,
    )  # fmt: skip
    _run("ip", "link", "set", node.host_veth, "master", BRIDGE, "up", check=True)
    _netns_run(node.name, "ip", "link", "set", "lo", "up")
    _netns_run(node.name, "ip", "addr", "add", f"{node.ip}/24", "dev", NODE_VETH)
    _netns_run(node.name, "ip", "link", "set", NODE_VETH, "up")
    # Pods' traffic to other nodes and Services is routed by the node; a pod reaching a Service
    # backed by a pod on its own bridge needs the bridge to pass through iptables.
    _netns_run(node.name, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1")
    for peer in peers:
        if peer != node:
            _netns_run(node.name, "ip", "route", "add", peer.pod_cidr, "via", peer.ip)
    _netns_run(node.name, "ip", "route", "add", SERVICE_CIDR, "dev", NODE_VETH)
    _run("ip", "route", "add", node.pod_cidr, "via", node.ip, check=True)
    _write_cni_config(node)


def _write_cni_config(node: NodeSpec) -> None:
    """Pods on a bridge inside the node's namespace, default route via the node (which has none
    of its own beyond this machine's addresses)."""
    conf = node.dir / "cni" / "net.d"
    conf.mkdir(parents=True)
    conflist = {
        "cniVersion": "1.0.0",
        "name": "e2en",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "isDefaultGateway": True,
                "hairpinMode": True,
                "ipMasq": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node.pod_cidr, "gateway": node.pod_gateway}]],
                    "dataDir": str(node.dir / "cni" / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    (conf / "10-e2en.conflist").write_text(json.dumps(conflist, indent=1))


def corefile(
    ready_port: int, kubeconfig: Path, negative_cache_seconds: int | None = None, port: int = 53
) -> str:
    """kubeadm's CoreDNS configuration (ttl 30; cluster.local answers not cached), or, with
    ``negative_cache_seconds``, NodeLocal DNSCache's habit of keeping NXDOMAIN that long."""
    cache = "disable success cluster.local\n        disable denial cluster.local"
    if negative_cache_seconds is not None:
        cache = f"disable success cluster.local\n        denial 9984 {negative_cache_seconds}"
    return f"""{CLUSTER_DOMAIN}:{port} in-addr.arpa:{port} ip6.arpa:{port} {{
    bind {HOST_IP}
    errors
    ready 127.0.0.1:{ready_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig} admin
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    cache 30 {{
        {cache}
    }}
}}
"""


# --- the cluster -----------------------------------------------------------------------------


@attrs.define
class Nodes:
    bin_dir: Path
    api: NodesAPIServer
    specs: tuple[NodeSpec, ...]
    negative_cache_seconds: int | None = None
    # kube-router, enforcing NetworkPolicies on every node (tests/harness/netpol.py); None: none.
    policy_engine: Path | None = None
    volumes_per_node: int = 6
    start_seconds: float = 0.0
    procs: dict[str, subprocess.Popen[bytes]] = attrs.field(factory=dict)
    imported: list[Path] = attrs.field(factory=list)  # images every node (re)started gets

    @property
    def kubeconfig(self) -> Path:
        return self.api.kubeconfig

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    def spec(self, name: str) -> NodeSpec:
        return next(s for s in self.specs if s.name == name)

    def kubectl(self, *args: str | os.PathLike[str], **kw: object) -> subprocess.CompletedProcess[str]:
        return self.api.kubectl(*args, **kw)  # type: ignore[arg-type]

    def log(self, key: str) -> Path:
        return ROOT / "logs" / f"{key.replace('/', '-')}.log"

    # --- start ---

    def boot(self) -> None:
        began = time.monotonic()
        (ROOT / "logs").mkdir(parents=True, exist_ok=True)
        _host_network()
        for spec in self.specs:
            _node_network(spec, self.specs)
        self.api.start()
        # Before the controller-manager: see node.py (it maps kinds from discovery at start).
        self.api.apply_crds()
        self._start_controllers()
        self.kubectl("apply", "-f", "-", input=DNS_SERVICE)
        self.imported.append(images.pause_archive(ROOT / "images"))
        for spec in self.specs:
            self._start_containerd(spec)
        for spec in self.specs:
            self._wait_containerd(spec)
            self._start_kubelet_and_proxy(spec)
        self._start_host_proxy()
        self._start_coredns()
        for spec in self.specs:
            self.wait_ready(spec.name)
            self._start_policy_engine(spec)  # it needs its Node, registered by now
        self.kubectl("apply", "-f", "-", input=LOCAL_STORAGE_CLASS)
        self.add_local_volumes(self.volumes_per_node)
        self.start_seconds = time.monotonic() - began

    def _start_controllers(self) -> None:
        admin = self.api.kubeconfig
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
                # No node IPAM: each node's podCIDR is its CNI config's, fixed here.
                "--controllers=*,-nodeipam",
                f"--cluster-cidr={CLUSTER_CIDR}",
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

    def _start_containerd(self, spec: NodeSpec) -> None:
        c = spec.dir / "containerd"
        c.mkdir(parents=True, exist_ok=True)
        (c / "config.toml").write_text(
            containerd_config(c, spec.containerd_socket, spec.dir / "cni" / "net.d", netns_under_state=True)
        )
        self._spawn(
            f"{spec.name}/containerd", [f"--config={c / 'config.toml'}"], Path("/usr/bin/containerd"), spec
        )

    def _wait_containerd(self, spec: NodeSpec) -> None:
        """Until it answers; then every image the nodes have (the pause image first)."""
        address = f"--address={spec.containerd_socket}"
        self._wait(lambda: _run("ctr", address, "version").returncode == 0, f"{spec.name}/containerd", 60)
        for archive in self.imported:
            images.import_archive(archive, address=spec.containerd_socket)

    def _start_kubelet_and_proxy(self, spec: NodeSpec) -> None:
        make_cgroup_root(spec.cgroup)
        k = spec.dir / "kubelet"
        k.mkdir(parents=True, exist_ok=True)
        token = self.api.node_tokens[spec.name]
        kubeconfig = self.api.netns_kubeconfig(k / "kubelet.kubeconfig", token=token, user=spec.name)
        (k / "resolv.conf").write_text("")  # pods get cluster DNS only, never the host's resolvers
        config = kubelet_config(
            cgroup_root=f"/{spec.cgroup}",
            endpoint=f"unix://{spec.containerd_socket}",
            cluster_dns=DNS_SERVICE_IP,
            resolv_conf=k / "resolv.conf",
            pod_cidr=spec.pod_cidr,
            port=KUBELET_PORT,
        )
        (k / "config.yaml").write_text(yaml.safe_dump(config))
        labels = f"topology.kubernetes.io/zone={spec.zone},topology.kubernetes.io/region=e2en"
        self._spawn(
            f"{spec.name}/kubelet",
            [
                f"--config={k / 'config.yaml'}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={k / 'root'}",
                f"--cert-dir={k / 'pki'}",
                f"--hostname-override={spec.name}",
                f"--node-ip={spec.ip}",
                f"--node-labels={labels}",
                "--v=2",
            ],
            spec=spec,
        )
        self._start_proxy(spec)

    def _start_proxy(self, spec: NodeSpec) -> None:
        admin = self.api.netns_kubeconfig(
            spec.dir / "admin.kubeconfig", token=self.api.admin_token, user="admin"
        )
        self._spawn(
            f"{spec.name}/kube-proxy",
            [
                f"--kubeconfig={admin}",
                f"--hostname-override={spec.name}",
                f"--bind-address={spec.ip}",
                "--proxy-mode=iptables",
                f"--cluster-cidr={CLUSTER_CIDR}",
                "--healthz-bind-address=127.0.0.1:10256",
                "--metrics-bind-address=127.0.0.1:10249",
                "--conntrack-max-per-core=0",  # a global sysctl: leave it alone
            ],
            spec=spec,
        )

    def _start_policy_engine(self, spec: NodeSpec) -> None:
        """kube-router's NetworkPolicy controller in the node's namespace (its iptables and ipsets
        are the namespace's own), as its DaemonSet runs with the host's network on a real node."""
        if self.policy_engine is None:
            return
        args = netpol.kube_router_args(
            kubeconfig=spec.dir / "admin.kubeconfig", node=spec.name, service_cidr=SERVICE_CIDR
        )
        self._spawn(f"{spec.name}/kube-router", args, self.policy_engine, spec)

    def wait_policy_engines(self, timeout: float = 60) -> None:
        """Until every node's kube-router answers its health check (its first sync done)."""
        for spec in self.specs:
            url = f"http://{spec.ip}:{netpol.HEALTH_PORT}/healthz"
            self._wait(lambda url=url: _http_ok(url), f"{spec.name}/kube-router", timeout)

    def _start_host_proxy(self) -> None:
        """ClusterIPs from this host (tests, the operator run here) as from a pod."""
        self._spawn(
            "host/kube-proxy",
            [
                f"--kubeconfig={self.api.kubeconfig}",
                # kube-proxy 1.34 waits for its own Node object before it programs anything;
                # borrowing the first node's name only matters to Services whose traffic policy
                # is Local (this host would use that node's endpoints).
                f"--hostname-override={self.specs[0].name}",
                f"--bind-address={HOST_IP}",
                "--proxy-mode=iptables",
                f"--cluster-cidr={CLUSTER_CIDR}",
                f"--healthz-bind-address=127.0.0.1:{_free_port()}",
                f"--metrics-bind-address=127.0.0.1:{_free_port()}",
                "--conntrack-max-per-core=0",
                "--iptables-localhost-nodeports=false",  # leaves the host's route_localnet alone
            ],
        )

    def _start_coredns(self) -> None:
        self.start_coredns(53, self.negative_cache_seconds)

    def start_coredns(self, port: int, negative_cache_seconds: int | None) -> None:
        """CoreDNS on this host's bridge address at ``port`` (53: the one pods use; another
        port: a variant beside it, e.g. to compare negative caching)."""
        ready = _free_port()
        path = ROOT / "coredns" / f"Corefile-{port}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(corefile(ready, self.api.kubeconfig, negative_cache_seconds, port))
        key = "coredns" if port == 53 else f"coredns-{port}"
        self._spawn(key, [f"-conf={path}"], self.bin_dir / "coredns")
        self._wait(lambda: _http_ok(f"http://127.0.0.1:{ready}/ready"), key, 60)

    def cache_denials(self, seconds: int | None) -> None:
        """Restart the CoreDNS pods use with denials cached ``seconds`` (None: kubeadm's
        configuration, denials not cached), for what negative caching does to the operator."""
        _terminate(self.procs.pop("coredns"), grace=5)
        self.negative_cache_seconds = seconds
        self._start_coredns()

    def wait_ready(self, name: str, ready: bool = True, timeout: float = 120) -> None:
        """Until the Node's Ready condition is True and the taints Kubernetes put on it while it
        was away are gone (or, with ``ready=False``, until it is not Ready). The node lifecycle
        controller lifts those taints a monitor period after Ready: a cluster made in between
        is scheduled onto two nodes only, two members sharing one."""

        def reached() -> bool:
            out = self.kubectl("get", "node", name, "-o", "json", check=False)
            if out.returncode:
                return False
            node = json.loads(out.stdout)
            conds = node["status"].get("conditions", [])
            is_ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conds)
            if not ready:
                return not is_ready
            taints = {t.get("key") for t in node["spec"].get("taints") or []}
            return is_ready and not taints & NODE_AWAY_TAINTS

        key = f"{name}/kubelet"
        self._wait(reached, key, timeout, check_alive=ready)

    def _spawn(
        self, key: str, args: list[str], binary: Path | None = None, spec: NodeSpec | None = None
    ) -> subprocess.Popen[bytes]:
        exe = str(binary or self.bin_dir / key.split("/")[-1])
        cmd = [*_in_netns(spec.name), exe, *args] if spec else [exe, *args]
        proc = _spawn(cmd, self.log(key))
        self.procs[key] = proc
        return proc

    def _wait(self, ready: object, key: str, timeout: float, check_alive: bool = True) -> None:
        proc = self.procs.get(key) if check_alive else None
        KubeAPIServer._wait(ready, proc, self.log(key), key, timeout)

    # --- node operations ---

    def import_image(self, archive: Path) -> None:
        """Into every node's containerd, now and whenever a node starts again."""
        self.imported.append(archive)
        for spec in self.specs:
            images.import_archive(archive, address=spec.containerd_socket)

    def stop(self, name: str) -> None:
        """The node fails: its pods frozen (cgroup freezer; they keep their state, answer
        nothing), its kubelet, kube-proxy and containerd killed (SIGKILL, no clean-up)."""
        spec = self.spec(name)
        self._freeze(spec, "FROZEN")
        for component in ("kubelet", "kube-proxy", "kube-router", "containerd"):
            proc = self.procs.pop(f"{name}/{component}", None)
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)

    def start(self, name: str) -> None:
        """The node returns: pods thawed, containerd (which finds its shims), kubelet, kube-proxy."""
        spec = self.spec(name)
        self._freeze(spec, "THAWED")
        self._start_containerd(spec)
        self._wait_containerd(spec)
        self._start_kubelet_and_proxy(spec)
        self._start_policy_engine(spec)

    def _freeze(self, spec: NodeSpec, state: str) -> None:
        freezer = Path("/sys/fs/cgroup/freezer") / spec.cgroup
        (freezer / "freezer.state").write_text(state)
        until(
            lambda: (freezer / "freezer.state").read_text().strip() == state, within=30, every=0.1, what=state
        )

    def _partition_rules(self, name: str, both_ways: bool, peers_only: bool) -> list[list[str]]:
        """(table, chain, match...) of each DROP: raw PREROUTING sees what arrives before
        conntrack or kube-proxy's ACCEPTs; mangle POSTROUTING sees all that leaves, the pods'
        forwarded traffic included. With ``peers_only`` only what comes from or goes to the
        other nodes and their pods (this host, the API server and the operator still reach it)."""
        peers: list[str | None] = [None]  # None: any address
        if peers_only:
            peers = [addr for spec in self.specs if spec.name != name for addr in (spec.ip, spec.pod_cidr)]

        def only(flag: str, peer: str | None) -> list[str]:
            return [flag, peer] if peer else []

        rules = [["raw", "PREROUTING", "-i", NODE_VETH, *only("-s", p), "-j", "DROP"] for p in peers]
        if both_ways:
            rules += [["mangle", "POSTROUTING", "-o", NODE_VETH, *only("-d", p), "-j", "DROP"] for p in peers]
        return rules

    def partition(self, name: str, both_ways: bool = True, peers_only: bool = False) -> None:
        """Cut the node off the network: what arrives is dropped, and with ``both_ways`` what
        leaves too; with ``peers_only``, only from and to the other nodes. The node keeps
        running, as a partitioned machine does."""
        for table, chain, *match in self._partition_rules(name, both_ways, peers_only):
            _netns_run(name, "iptables", "-t", table, "-I", chain, *match)

    def heal(self, name: str) -> None:
        """Remove whatever partition() added (any kind); nothing else changes."""
        for peers_only in (False, True):
            for table, chain, *match in self._partition_rules(name, True, peers_only):
                while _run(*_in_netns(name), "iptables", "-t", table, "-D", chain, *match).returncode == 0:
                    pass

    # --- volumes ---

    def add_local_volumes(self, per_node: int, first: int = 0, storage_class: str = LOCAL_CLASS) -> None:
        """``per_node`` more PVs on each node (pv-<first>... ): directories under the node's own."""
        pvs = []
        for spec in self.specs:
            for i in range(first, first + per_node):
                spec.volume_path(i).mkdir(parents=True, exist_ok=True)
                pvs.append(local_volume(spec, i, storage_class))
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(pvs))

    def add_storage_class(self, name: str, per_node: int, first: int) -> None:
        """A second class like the default one (node-local, bound where the pod lands; not the
        default), with ``per_node`` PVs of it on each node (pv-<first>...)."""
        document = yaml.safe_load(LOCAL_STORAGE_CLASS)
        document["metadata"] = {"name": name}
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump(document))
        self.add_local_volumes(per_node, first, storage_class=name)

    def recycle_local_volumes(self) -> list[str]:
        """Released PVs (their claim deleted) emptied and made Available again, as the local
        static provisioner's cleaner does; returns their names."""
        pvs = self.api.get_json("pv", "-l", "e2en/node")["items"]
        released = [pv for pv in pvs if pv["status"].get("phase") == "Released"]
        for pv in released:
            path = Path(pv["spec"]["local"]["path"])
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
            patch = '[{"op": "remove", "path": "/spec/claimRef"}]'
            self.kubectl("patch", "pv", pv["metadata"]["name"], "--type=json", "-p", patch)
        return [pv["metadata"]["name"] for pv in released]

    @contextlib.contextmanager
    def recycling(self, every: float = 3.0) -> Iterator[None]:
        """Released volumes made Available again every few seconds while the block runs: the
        operator deletes the claim of every member it replaces, and each node has only
        ``volumes_per_node`` volumes for all the clusters a tier makes."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(every):
                with contextlib.suppress(Exception):  # the API server may be busy: next round
                    self.recycle_local_volumes()

        thread = threading.Thread(target=loop, name="recycle-volumes", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(30)

    # --- use ---

    def cluster_dns_command(self, cmd: Sequence[str | os.PathLike[str]]) -> list[str]:
        """``cmd`` on this host, resolving names through cluster DNS as a pod does (a mount
        namespace of its own sees a resolv.conf naming CoreDNS; the host's stays as it is)."""
        resolv = ROOT / "host-resolv.conf"
        resolv.write_text(f"nameserver {HOST_IP}\noptions timeout:1 attempts:2\n")
        script = f'mount --bind {resolv} /etc/resolv.conf && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *map(str, cmd)]

    # --- stop ---

    def shutdown(self) -> None:
        """Everything stops; cleanup() then removes pods, mounts and namespaces (faster than
        deleting pods gracefully, as node.py found)."""
        for key in list(self.procs):
            _terminate(self.procs.pop(key), grace=10)
        self.api.stop()


@contextlib.contextmanager
def open_nodes(
    count: int = 3, negative_cache_seconds: int | None = None, policy_engine: Path | None = None
) -> Iterator[Nodes]:
    """``count`` started nodes; stopped and cleaned up on exit, whatever happened. With
    ``policy_engine`` (kube-router's binary) NetworkPolicies are enforced on every node."""
    bin_dir = require_node_binaries()
    binaries = require_binaries()
    specs = tuple(NodeSpec(i) for i in range(1, count + 1))
    with _node_lock():  # node.py's: the one-node tier and this one never run at once
        # A crashed one-node run's remains first: its pods' /run/netns/cni-* mounts would be
        # hidden under the bind mount `ip netns add` makes of /run/netns, out of its cleanup's reach.
        one_node.cleanup()
        cleanup()
        ROOT.mkdir(parents=True)
        api = NodesAPIServer(
            binaries=binaries, work_dir=ROOT / "kube-apiserver", node_names=tuple(s.name for s in specs)
        )
        api.work_dir.mkdir(parents=True)
        nodes = Nodes(
            bin_dir=bin_dir,
            api=api,
            specs=specs,
            negative_cache_seconds=negative_cache_seconds,
            policy_engine=policy_engine,
        )

        def stop() -> None:
            nodes.shutdown()
            cleanup()

        atexit.register(stop)
        try:
            nodes.boot()
            yield nodes
        finally:
            stop()
            atexit.unregister(stop)


__all__ = ["Nodes", "cleanup", "leftovers", "open_nodes"]

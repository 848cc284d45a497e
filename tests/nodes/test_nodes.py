"""The three-node harness itself, on real components: nodes Ready in their zones, pods spread over
them reaching each other by pod IP, ClusterIP and DNS name (from pods and from this host), a claim
bound to a volume on its pod's node, and the node operations the multi-node tests will use: a
partition cuts a node off until healed; a stopped node goes NotReady with its pods unreachable,
and comes back Ready with them.

One Deployment of three web servers (busybox httpd answering its node's name), one per node by
required anti-affinity, serves the network tests.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Callable, Container
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.harness.dns_query import NOERROR, NXDOMAIN, dns_query
from tests.harness.images import BUSYBOX_IMAGE
from tests.harness.nodes import DNS_SERVICE_IP, Nodes
from tests.harness.poll import until

pytestmark = pytest.mark.slow

WEB = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: web}}
            topologyKey: kubernetes.io/hostname
      containers:
      - name: web
        image: IMAGE
        imagePullPolicy: Never
        command: [sh, -c, 'mkdir -p /www && echo "$NODE" > /www/index.html && exec httpd -f -p 8080 -h /www']
        env:
        - name: NODE
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
        readinessProbe:
          tcpSocket: {port: 8080}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
""".replace("IMAGE", BUSYBOX_IMAGE)


def _web_pods(nodes: Nodes, ns: str) -> list[dict[str, Any]]:
    out = nodes.kubectl("get", "pods", "-n", ns, "-l", "app=web", "-o", "json")
    return list(json.loads(out.stdout)["items"])


def _ready(pod: dict[str, Any]) -> bool:
    conds = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


@pytest.fixture(scope="module")
def web(three_nodes: Nodes, nodes_namespace: str) -> dict[str, dict[str, str]]:
    """node name -> {pod, ip} of the Deployment's pod there, once all three are Ready."""
    began = time.monotonic()
    three_nodes.kubectl("apply", "-n", nodes_namespace, "-f", "-", input=WEB)
    pods = until(
        lambda: [p for p in _web_pods(three_nodes, nodes_namespace) if _ready(p)],
        accept=lambda ready: len(ready) == 3,
        within=120,
        every=0.5,
        what="three web pods Ready",
    )
    print(f"\nthree web pods: apply -> all Ready in {time.monotonic() - began:.1f}s")
    return {p["spec"]["nodeName"]: {"pod": p["metadata"]["name"], "ip": p["status"]["podIP"]} for p in pods}


def _get_in_pod(nodes: Nodes, ns: str, pod: str, url: str, timeout: int = 3) -> str | None:
    """What ``url`` answers from inside ``pod`` (busybox wget), or None if nothing does in time.
    busybox's own timeout, not wget's -T (this busybox-static's wget segfaults on it)."""
    wget = ["timeout", str(timeout), "wget", "-q", "-O", "-", url]
    proc = nodes.kubectl("exec", "-n", ns, pod, "--", *wget, check=False, timeout=timeout + 30)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _get_from_host(url: str, timeout: float = 3) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.read().decode().strip()
    except OSError:
        return None


def _answered(get: Callable[[], str | None], expected: Container[str], where: str) -> None:
    """Until ``get()`` is one of ``expected`` (a node name), for at most 15 s."""
    until(get, accept=lambda got: got in expected, within=15, every=0.5, what=f"an answer in {where}")


def _service_ip(nodes: Nodes, ns: str) -> str:
    return str(nodes.api.get_json("service", "web", namespace=ns)["spec"]["clusterIP"])


# --- tests -------------------------------------------------------------------------------------


def test_three_nodes_are_ready_in_their_zones(three_nodes: Nodes) -> None:
    items = three_nodes.api.get_json("nodes")["items"]
    got = {
        n["metadata"]["name"]: (
            n["metadata"]["labels"].get("topology.kubernetes.io/zone"),
            n["metadata"]["labels"].get("kubernetes.io/hostname"),
            next(a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP"),
            _ready(n),
        )
        for n in items
    }
    assert got == {s.name: (s.zone, s.name, s.ip, True) for s in three_nodes.specs}


def test_spread_pods_reach_each_other_by_ip_service_and_name(
    three_nodes: Nodes, nodes_namespace: str, web: dict[str, dict[str, str]]
) -> None:
    ns = nodes_namespace
    assert sorted(web) == three_nodes.names  # one pod per node: the anti-affinity held
    service_ip = _service_ip(three_nodes, ns)
    name = f"web.{ns}.svc.cluster.local"
    for node, here in web.items():
        for other, there in web.items():
            # Every pod reaches every pod, its own included, by pod IP across the nodes.
            assert _get_in_pod(three_nodes, ns, here["pod"], f"http://{there['ip']}:8080/") == other
        # The Service by ClusterIP and by DNS name (kube-proxy in the node, CoreDNS on the
        # host), given the node's kube-proxy a moment to program a Service made with the pods.
        _answered(partial(_get_in_pod, three_nodes, ns, here["pod"], f"http://{service_ip}/"), web, node)
        assert _get_in_pod(three_nodes, ns, here["pod"], f"http://{name}/") in web, node
        looked_up = three_nodes.kubectl("exec", "-n", ns, here["pod"], "--", "nslookup", name).stdout
        assert service_ip in looked_up
        assert DNS_SERVICE_IP in looked_up  # the pods' nameserver: the kube-dns Service
    # From this host too: pod IPs (routed via each node), the ClusterIP (the host's kube-proxy),
    # the name through cluster DNS.
    for node, there in web.items():
        assert _get_from_host(f"http://{there['ip']}:8080/") == node
    _answered(lambda: _get_from_host(f"http://{service_ip}/"), web, "this host")
    getent = subprocess.run(
        three_nodes.cluster_dns_command(["getent", "hosts", name]), capture_output=True, text=True, timeout=30
    )
    assert getent.stdout.split()[:1] == [service_ip], getent


def _answered_after(began: float, name: str, port: int) -> float:
    """Seconds from ``began`` until the server at ``port`` answers ``name`` (polled every 0.1 s)."""
    until(lambda: dns_query(name, port).rcode, accept=lambda rcode: rcode == NOERROR, within=30, every=0.1)
    return time.monotonic() - began


def test_dns_answers_as_kubeadm_configures_it_and_a_negative_cache_delays(
    three_nodes: Nodes, nodes_namespace: str
) -> None:
    """kubeadm's CoreDNS answers a Service created after a failed lookup at once (cluster.local
    denials are not cached) with TTL 30; a variant keeping denials 5 s (NodeLocal DNSCache's
    default) answers only once its cached NXDOMAIN expires: what issue 28's formation bench
    compares."""
    ns, variant = nodes_namespace, 5353
    three_nodes.start_coredns(variant, negative_cache_seconds=5)
    name = f"late.{ns}.svc.cluster.local"
    assert dns_query(name).rcode == dns_query(name, variant).rcode == NXDOMAIN  # now cached by the variant
    three_nodes.kubectl("create", "service", "clusterip", "late", "--tcp=80:80", "-n", ns)
    began = time.monotonic()
    plain, cached = _answered_after(began, name, 53), _answered_after(began, name, variant)
    print(
        f"\nService made -> answered: kubeadm's CoreDNS {plain:.1f}s, with a 5 s denial cache {cached:.1f}s"
    )
    assert plain < 2.5
    assert 2.5 < cached < 8
    assert dns_query(name).ttl == 30


CLAIM = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: writer
    image: IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'echo "$NODE" > /data/written-on && exec sleep 3600']
    env:
    - name: NODE
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
""".replace("IMAGE", BUSYBOX_IMAGE)


def test_a_claim_binds_a_volume_on_its_pods_node(three_nodes: Nodes, nodes_namespace: str) -> None:
    ns = nodes_namespace
    three_nodes.kubectl("apply", "-n", ns, "-f", "-", input=CLAIM)
    pod = until(
        lambda: three_nodes.api.get_json("pod", "writer", namespace=ns),
        accept=lambda p: p["status"].get("phase") == "Running",
        within=60,
        what="the writer pod Running",
    )
    node = pod["spec"]["nodeName"]
    claim = three_nodes.api.get_json("pvc", "data", namespace=ns)
    pv = three_nodes.api.get_json("pv", claim["spec"]["volumeName"])
    # Bound where the pod landed, and the data is in that node's own directory on this host.
    assert pv["metadata"]["labels"]["e2en/node"] == node
    written = Path(pv["spec"]["local"]["path"]) / "written-on"
    until(lambda: written.exists() and written.read_text().strip(), accept=lambda t: t == node, within=10)
    # Claim gone: the volume is Released, then emptied and Available again.
    three_nodes.kubectl("delete", "-n", ns, "pod/writer", "pvc/data", "--wait=true", timeout=60)
    name = pv["metadata"]["name"]
    until(
        lambda: three_nodes.api.get_json("pv", name)["status"]["phase"],
        accept=lambda ph: ph == "Released",
        within=30,
    )
    # Its volume among those recycled (earlier tests' replaced members may have left others).
    assert name in three_nodes.recycle_local_volumes()
    assert three_nodes.api.get_json("pv", name)["status"]["phase"] == "Available"
    assert not written.exists()


@pytest.mark.parametrize("both_ways", [True, False], ids=["both-ways", "inbound-only"])
def test_a_partitioned_node_is_unreachable_until_healed(
    three_nodes: Nodes, nodes_namespace: str, web: dict[str, dict[str, str]], both_ways: bool
) -> None:
    ns = nodes_namespace
    cut, peer = three_nodes.names[1], three_nodes.names[0]
    url = f"http://{web[cut]['ip']}:8080/"
    three_nodes.partition(cut, both_ways=both_ways)
    try:
        # Inbound only is enough to cut a TCP exchange: the request never arrives. (Nothing is
        # run in the cut node's pod meanwhile: exec goes through its kubelet, cut off too.)
        assert _get_in_pod(three_nodes, ns, web[peer]["pod"], url) is None
        assert _get_from_host(url) is None
    finally:
        three_nodes.heal(cut)
    _answered(lambda: _get_in_pod(three_nodes, ns, web[peer]["pod"], url), [cut], peer)
    _answered(
        lambda: _get_in_pod(three_nodes, ns, web[cut]["pod"], f"http://{web[peer]['ip']}:8080/"), [peer], cut
    )
    assert _get_from_host(url) == cut


def test_a_stopped_node_goes_not_ready_and_comes_back(
    three_nodes: Nodes, nodes_namespace: str, web: dict[str, dict[str, str]]
) -> None:
    ns = nodes_namespace
    down, peer = three_nodes.names[2], three_nodes.names[0]
    url = f"http://{web[down]['ip']}:8080/"
    began = time.monotonic()
    three_nodes.stop(down)
    try:
        # The node controller's grace period (its default) passes before the node is NotReady.
        three_nodes.wait_ready(down, ready=False, timeout=120)
        print(f"\n{down} stopped -> NotReady in {time.monotonic() - began:.1f}s")
        assert _get_in_pod(three_nodes, ns, web[peer]["pod"], url) is None  # frozen: no answer
        assert _get_from_host(url) is None
    finally:
        began = time.monotonic()
        three_nodes.start(down)
    three_nodes.wait_ready(down, timeout=120)
    print(f"{down} started -> Ready in {time.monotonic() - began:.1f}s")
    # The same pod, thawed: nothing was recreated.
    until(
        lambda: _get_from_host(url), accept=lambda got: got == down, within=60, what=f"{down}'s pod answers"
    )
    assert _get_in_pod(three_nodes, ns, web[peer]["pod"], url) == down
    assert {p["metadata"]["name"] for p in _web_pods(three_nodes, ns)} == {w["pod"] for w in web.values()}

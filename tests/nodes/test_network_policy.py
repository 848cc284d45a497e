"""The cluster's NetworkPolicy enforced (issue 33): kube-router's policy controller runs on each of
the three nodes (tests/harness/netpol.py), the operator on this host is admitted by its address
(--operator-cidr), and with the policy in force

- the cluster forms, heals (a member pod deleted is replaced by a member that joins over the
  peer port) and backs up (an on-demand backup, verified in a pod the operator pushes the
  snapshot to and asks for its HashKV);
- a pod in another namespace without the clientSelector label reaches neither the client nor
  the peer port of any member, on its node or another; a pod there with the label reaches the
  client port only; a pod of the cluster's namespace the client port only;
- networkPolicy: false deletes the policy, and the pod outside gets in.

Reachability is read from inside each prober pod by busybox wget to a member's pod IP: a member
port, which speaks TLS, answers plain HTTP with "400 Bad Request" or by closing the connection
("error getting response"): connected; a rejected connection says "can't connect" (kube-router
rejects what no policy admits)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from supervisor.kube import manifests as m
from supervisor.kube import network_policy as np
from tests.harness import members_on_nodes as on
from tests.harness.cluster import Cluster
from tests.harness.components import require
from tests.harness.formation import etcd_cluster, wait_for
from tests.harness.images import BUSYBOX_IMAGE
from tests.harness.netpol import kube_router_binary
from tests.harness.nodes import Nodes
from tests.harness.poll import until

pytestmark = pytest.mark.slow

NAME = "fenced"
CLIENT_LABEL = "etcd-client"

PROBER = """
apiVersion: v1
kind: Pod
metadata: {name: NAME, labels: LABELS}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: probe
    image: IMAGE
    imagePullPolicy: Never
    command: [sleep, "3600"]
"""

# One exec per prober: each target's wget output after a marker line.
PROBE = 'for t in "$@"; do echo "== $t"; timeout 4 wget -q -O - "http://$t/" 2>&1; echo; done'


def _prober(name: str, labels: dict[str, str]) -> str:
    return PROBER.replace("NAME", name).replace("LABELS", json.dumps(labels)).replace("IMAGE", BUSYBOX_IMAGE)


def reachable(nodes: Nodes, ns: str, pod: str, targets: list[str]) -> dict[str, bool]:
    """target (ip:port) -> whether `pod` connects to it."""
    out = nodes.kubectl("exec", "-n", ns, pod, "--", "sh", "-c", PROBE, "sh", *targets, timeout=120).stdout
    found: dict[str, bool] = {}
    for block in re.split(r"^== ", out, flags=re.M)[1:]:
        target, _, said = block.partition("\n")
        if "Bad Request" in said or "error getting response" in said:  # connected, then TLS's answer
            found[target] = True
        elif "can't connect" in said or not said.strip():  # rejected, or silent until the timeout
            found[target] = False
        else:
            raise AssertionError(f"{pod} -> {target}: unexpected answer {said!r}")
    return found


def _member_ips(cluster: Cluster, ns: str) -> list[str]:
    return sorted(
        p["status"]["podIP"] for p in on.live_members(cluster, ns, NAME) if p["status"].get("podIP")
    )


def test_the_clusters_network_policy_is_enforced(
    three_nodes: Nodes, etcd_nodes: Cluster, nodes_namespace: str, nodes_operator: Path, tmp_path: Path
) -> None:
    if three_nodes.policy_engine is None:
        require("kube-router, the NetworkPolicy implementation of the three nodes", kube_router_binary)
    three_nodes.wait_policy_engines()
    ns, cluster = nodes_namespace, etcd_nodes
    outside = f"{ns}-out"
    three_nodes.kubectl("create", "namespace", outside)
    try:
        _enforced(three_nodes, cluster, ns, outside, tmp_path)
    finally:
        three_nodes.kubectl("delete", "namespace", outside, "--wait=false", check=False)


def _enforced(nodes: Nodes, cluster: Cluster, ns: str, outside: str, work: Path) -> None:
    began = time.monotonic()
    resource = etcd_cluster(NAME, cluster.etcd_version, tls=True)
    resource["spec"]["security"]["clientSelector"] = {"matchLabels": {CLIENT_LABEL: NAME}}
    cluster.apply([resource], namespace=ns)
    probers = [
        (outside, "stranger", {"app": "stranger"}),
        (outside, "tenant", {CLIENT_LABEL: NAME}),
        (ns, "neighbour", {"app": "neighbour"}),
    ]
    for where, pod, labels in probers:
        nodes.kubectl("apply", "-n", where, "-f", "-", input=_prober(pod, labels))
    wait_for(f"{NAME} at three voters", lambda: on.at_full_size(cluster, ns, NAME, 3), 300, poll=1.0)
    formed = time.monotonic() - began
    policy = cluster.get_json("networkpolicy", np.network_policy_name(m.ClusterRef(ns, NAME)), namespace=ns)
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    for where, pod, _ in probers:
        nodes.kubectl(
            "wait", "--for=condition=Ready", f"pod/{pod}", "-n", where, "--timeout=120s", timeout=150
        )

    expected = {"stranger": (False, False), "tenant": (True, False), "neighbour": (True, False)}

    def table() -> dict[str, dict[str, bool]]:
        ips = _member_ips(cluster, ns)
        targets = [f"{ip}:{port}" for ip in ips for port in (m.CLIENT_PORT, m.PEER_PORT)]
        return {pod: reachable(nodes, where, pod, targets) for where, pod, _ in probers}

    def as_expected(seen: dict[str, dict[str, bool]]) -> bool:
        for pod, (client, peer) in expected.items():
            for target, ok in seen[pod].items():
                if ok != (client if target.endswith(f":{m.CLIENT_PORT}") else peer):
                    return False
        return all(len(v) == 6 for v in seen.values())

    # kube-router programs a policy and each new pod within a sync: a few seconds at most.
    until(table, accept=as_expected, within=60, every=2, what="the policy's reachability table")

    # Heals: a member pod deleted is replaced, the new member joining over the peer port.
    victim = sorted(p["metadata"]["name"] for p in on.live_members(cluster, ns, NAME))[0]
    old_ips = _member_ips(cluster, ns)
    healing = time.monotonic()
    cluster.kubectl("delete", "pod", victim, "-n", ns, "--wait=false")
    wait_for(
        f"{NAME} back at three voters after {victim} was deleted",
        lambda: _member_ips(cluster, ns) != old_ips and on.at_full_size(cluster, ns, NAME, 3),
        300,
        poll=1.0,
    )
    healed = time.monotonic() - healing
    until(table, accept=as_expected, within=60, every=2, what="the table with the replaced member")

    # Backs up: the operator pushes the snapshot to a verify pod the policy selects.
    backing = time.monotonic()
    store = work / "backups"
    store.mkdir()
    cluster.apply(
        [
            {
                "apiVersion": "etcd.io/v1alpha1",
                "kind": "EtcdBackup",
                "metadata": {"name": "fenced-now"},
                "spec": {"clusterName": NAME, "store": {"local": {"path": str(store)}}},
            }
        ],
        namespace=ns,
    )

    def backed_up() -> dict[str, Any] | None:
        found = cluster.get_json("etcdbackup", "fenced-now", namespace=ns).get("status") or {}
        assert found.get("phase") != "Failed", found
        return found if found.get("phase") == "Succeeded" else None

    taken = wait_for("the EtcdBackup Succeeded", backed_up, 180, poll=1.0)
    assert taken["verified"] is True
    backup = time.monotonic() - backing

    # networkPolicy false: the policy goes, and the pod outside gets in.
    cluster.kubectl(
        "patch",
        "etcdcluster",
        NAME,
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec":{"security":{"networkPolicy":false}}}',
    )
    wait_for(
        "the NetworkPolicy deleted",
        lambda: cluster.kubectl("get", "networkpolicy", NAME, "-n", ns, check=False).returncode != 0,
        60,
    )
    ip = _member_ips(cluster, ns)[0]
    until(
        lambda: reachable(nodes, outside, "stranger", [f"{ip}:{m.CLIENT_PORT}"]),
        accept=lambda seen: all(seen.values()),
        within=60,
        every=2,
        what="the stranger connects once the policy is gone",
    )
    print(f"formed in {formed:.1f}s, healed in {healed:.1f}s, backed up in {backup:.1f}s with the policy on")

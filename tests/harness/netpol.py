"""A real NetworkPolicy implementation for the three-node tier: kube-router's network policy
controller (`--run-firewall` alone: no routing, no service proxy), one per node inside the node's
network namespace, as its DaemonSet runs on a real cluster. Built from its Go module by
tests/envtest/build-kube-router.sh (`make netpol`; why kube-router and not
kube-network-policies is said there).

What it does to traffic here: for every pod a NetworkPolicy selects it keeps iptables chains in
the pod's node (filter FORWARD for routed traffic, physdev for pods on the same bridge) that
accept what a policy admits and reject the rest; traffic from an address of the pod's own node
(the kubelet's probes) is always accepted. This host (10.245.0.1, where the tests and the operator
run) is no node of the cluster: its connections to pods are policed as any outside address's,
which a policy admits only by an ipBlock (the operator's `--operator-cidr`).
"""

from __future__ import annotations

from pathlib import Path

from tests.harness.components import go_install_cached

BUILD = Path(__file__).resolve().parents[1] / "envtest" / "build-kube-router.sh"
HEALTH_PORT = 20244  # kube-router's default; each node's namespace has its own


def kube_router_binary() -> Path:
    """The binary build-kube-router.sh made for its pinned version; never built from a test."""
    return go_install_cached(BUILD, "kube-router", "netpol")


def kube_router_args(*, kubeconfig: Path, node: str, service_cidr: str) -> list[str]:
    """The network policy controller alone, for the node named `node`."""
    return [
        "--run-firewall=true",
        "--run-router=false",
        "--run-service-proxy=false",
        "--enable-cni=false",
        f"--kubeconfig={kubeconfig}",
        f"--hostname-override={node}",
        f"--service-cluster-ip-range={service_cidr}",
        f"--health-port={HEALTH_PORT}",
        "--metrics-port=0",
        "--v=1",
    ]

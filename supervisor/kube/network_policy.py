"""The NetworkPolicy of a cluster (spec.security.networkPolicy, on by default): who may reach its
pods, and on which port. Pure: the manifest from the owner, the spec and what the operator knows
of itself (OperatorAccess).

The policy selects every pod of the cluster (its labels: members, warm pods, the pods that
verify and restore backups) and admits, ingress only (egress is left alone: members resolve
names and reach each other, the operator's receiver pods reach nothing):

- the peer port (2380) from the cluster's own member and warm pods, nothing else (but for a
  cluster that adopts another, spec.adopt: its old members must reach it, from anywhere);
- the client port (2379) from every pod of the cluster's namespace, from the operator, and from
  the pods `spec.security.clientSelector` selects in any namespace (the namespace's own pods are
  admitted already, so a selector confined to it would add nothing: it is there for clients
  elsewhere; pick labels only trusted namespaces may set);
- the metrics port (2381) from the monitoring namespace the operator is told of
  (`--monitoring-namespace`), else from the cluster's namespace;
- the ports only the operator dials (a warm pod's start gate, a backup pod's snapshot receiver)
  from the operator alone.

The operator: in a cluster, its pods (its namespace and its pod's labels, read at start); from
outside (a laptop, a host process as in the tests) its connections arrive from an address that
is no pod's, which a NetworkPolicy can only admit as an ipBlock: `--operator-cidr` (repeatable)
names those. Traffic from the pod's own node (the kubelet's probes) is always allowed (Kubernetes'
NetworkPolicy documentation; kube-router accepts what comes from the node's addresses), so
readiness probes on the metrics port need no rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attrs import field, frozen

from actors.model import ClusterRef, ClusterSpec
from supervisor.kube import manifests as m
from supervisor.kube.snapshot_transfer import RECEIVE_PORT
from supervisor.kube.start_gate import GATE_PORT
from supervisor.kube.warm_members import COMPONENT_WARM

Obj = dict[str, Any]

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace
# Labels of a pod that change with each rollout of its Deployment, never part of who it is.
_ROLLOUT_LABELS = ("pod-template-hash", "controller-revision-hash", "pod-template-generation")


@frozen
class OperatorAccess:
    """Where the operator's own connections come from, and who scrapes metrics.

    `namespace` and `pod_labels`: the operator's pods in a cluster (None/empty outside one);
    `cidrs`: the addresses it dials from when it runs outside the cluster; `monitoring_namespace`:
    where Prometheus runs (None: metrics from the cluster's namespace)."""

    namespace: str | None = None
    pod_labels: Mapping[str, str] = field(factory=dict)
    cidrs: tuple[str, ...] = ()
    monitoring_namespace: str | None = None


def operator_pod_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels that say a pod is the operator's, from its own pod's (rollout hashes left out:
    the next ReplicaSet's pods have other values, and must still get in)."""
    return {k: v for k, v in labels.items() if k not in _ROLLOUT_LABELS}


def network_policy_name(ref: ClusterRef) -> str:
    return ref.name


def networkpolicy_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies"
    return f"{base}/{name}" if name else base


def _ports(*numbers: int) -> list[Obj]:
    return [{"protocol": "TCP", "port": n} for n in numbers]


def _namespace(name: str) -> Obj:
    return {"matchLabels": {NAMESPACE_NAME_LABEL: name}}


def operator_peers(access: OperatorAccess) -> list[Obj]:
    """The `from` entries that are the operator: its pods, and the addresses it dials from."""
    peers: list[Obj] = []
    if access.namespace is not None and access.pod_labels:
        peers.append(
            {
                "namespaceSelector": _namespace(access.namespace),
                "podSelector": {"matchLabels": dict(access.pod_labels)},
            }
        )
    peers += [{"ipBlock": {"cidr": cidr}} for cidr in access.cidrs]
    return peers


def etcd_pods(ref: ClusterRef) -> Obj:
    """The cluster's member and warm pods (a warm pod becomes a member in place)."""
    return {
        "matchLabels": m.cluster_labels(ref),
        "matchExpressions": [
            {"key": m.LABEL_COMPONENT, "operator": "In", "values": [m.COMPONENT_MEMBER, COMPONENT_WARM]}
        ],
    }


def network_policy(owner: m.Owner, spec: ClusterSpec, access: OperatorAccess) -> Obj:
    """The cluster's NetworkPolicy (module docstring: what it admits, and why)."""
    ref = owner.ref
    operator = operator_peers(access)
    clients: list[Obj] = [{"podSelector": {}}, *operator]
    if spec.client_selector is not None:
        clients.append({"namespaceSelector": {}, "podSelector": dict(spec.client_selector)})
    monitoring = access.monitoring_namespace
    scraper: Obj = {"namespaceSelector": _namespace(monitoring)} if monitoring else {"podSelector": {}}
    # An adopted cluster's old members (spec.adopt) are no pods of ours, often no pods at all
    # (static pods, systemd units): no selector names them, and they must reach the new
    # members' peer port, so an adopting cluster's peer port admits every source (TLS peers
    # still authenticate each other by the peer CA).
    peers: Obj = {"ports": _ports(m.PEER_PORT)}
    if spec.adopt is None:
        peers["from"] = [{"podSelector": etcd_pods(ref)}]
    ingress = [
        peers,
        {"from": clients, "ports": _ports(m.CLIENT_PORT)},
        {"from": [scraper], "ports": _ports(m.METRICS_PORT)},
    ]
    if operator:  # none known: the gate and the receiver are closed to all but the node
        ingress.append({"from": operator, "ports": _ports(GATE_PORT, RECEIVE_PORT)})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": m.cluster_object_metadata(owner, network_policy_name(ref)),
        "spec": {
            "podSelector": {"matchLabels": m.cluster_labels(ref)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }

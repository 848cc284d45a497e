"""The cluster's NetworkPolicy (supervisor/kube/network_policy.py): who reaches which port, read
off the manifest by a small evaluator of NetworkPolicy's own rules (a source is admitted on a
port when some ingress rule lists the port and a peer that matches the source), and the
clientSelector's codec."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

import attrs
import pytest

from actors.codec import parse_spec
from actors.codec.fields import Reader
from actors.model import AdoptSpec, ClusterSpec
from actors.pod_template import kubernetes_only
from supervisor.kube import cluster_objects as objects
from supervisor.kube import manifests as m
from supervisor.kube import network_policy as np
from supervisor.kube.snapshot_transfer import RECEIVE_PORT
from supervisor.kube.start_gate import GATE_PORT
from supervisor.kube.warm_members import warm_selector
from tests.unit.test_kube_manifests import OWNER

NS = OWNER.ref.namespace
IN_CLUSTER = np.OperatorAccess(
    namespace="etcd-supervisor",
    pod_labels={"app.kubernetes.io/name": "etcd-supervisor", "app.kubernetes.io/component": "operator"},
)
OUTSIDE = np.OperatorAccess(cidrs=("10.245.0.1/32",))


@attrs.frozen
class Source:
    namespace: str | None = None  # None: not a pod (the host, a laptop)
    labels: Mapping[str, str] = attrs.field(factory=dict)
    ip: str = "10.1.2.3"


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        present, value = e["key"] in labels, labels.get(e["key"])
        ok = {
            "In": present and value in e.get("values", []),
            "NotIn": not present or value not in e.get("values", []),
            "Exists": present,
            "DoesNotExist": not present,
        }[e["operator"]]
        if not ok:
            return False
    return True


def _matches(peer: Mapping[str, Any], source: Source) -> bool:
    if "ipBlock" in peer:
        return ipaddress.ip_address(source.ip) in ipaddress.ip_network(peer["ipBlock"]["cidr"])
    if source.namespace is None:
        return False  # pod and namespace selectors match pods only
    if "namespaceSelector" in peer:
        ns_labels = {np.NAMESPACE_NAME_LABEL: source.namespace}
        in_namespace = _selects(peer["namespaceSelector"], ns_labels)
    else:
        in_namespace = source.namespace == NS  # the policy's own namespace
    return in_namespace and _selects(peer.get("podSelector") or {}, source.labels)


def admits(policy: Mapping[str, Any], source: Source, port: int) -> bool:
    return any(
        any(p["port"] == port for p in rule["ports"])
        and ("from" not in rule or any(_matches(peer, source) for peer in rule["from"]))
        for rule in policy["spec"]["ingress"]
    )


MEMBER = Source(NS, m.member_labels(OWNER.ref, "demo-1"))
WARM = Source(NS, {**warm_selector(OWNER.ref), m.LABEL_PEER_RECORD: "true"})
NEIGHBOUR = Source(NS, {"app": "web"})  # any pod of the cluster's namespace
OTHER_CLUSTER = Source(NS, m.member_labels(attrs.evolve(OWNER.ref, name="other"), "other-0"))
STRANGER = Source("elsewhere", {"app": "web"})
TENANT = Source("tenants", {"etcd-client": "demo"})
OPERATOR_POD = Source("etcd-supervisor", {**IN_CLUSTER.pod_labels, "pod-template-hash": "abc"})
HOST = Source(None, ip="10.245.0.1")
PROMETHEUS = Source("monitoring", {"app": "prometheus"})


def test_it_selects_every_pod_of_the_cluster_and_polices_ingress_only() -> None:
    policy = np.network_policy(OWNER, ClusterSpec(), IN_CLUSTER)
    assert policy["metadata"]["name"] == np.network_policy_name(OWNER.ref)
    assert policy["metadata"]["ownerReferences"] == [m.owner_reference(OWNER)]
    assert policy["spec"]["podSelector"] == {"matchLabels": m.cluster_labels(OWNER.ref)}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    for pod in (MEMBER, WARM):  # and the verify and restore pods, which carry the same labels
        assert _selects(policy["spec"]["podSelector"], pod.labels)
    assert not _selects(policy["spec"]["podSelector"], OTHER_CLUSTER.labels)


@pytest.mark.parametrize(
    "source,allowed",
    [
        (MEMBER, True),
        (WARM, True),
        (NEIGHBOUR, False),
        (OTHER_CLUSTER, False),
        (OPERATOR_POD, False),
        (HOST, False),
        (STRANGER, False),
    ],
)
def test_the_peer_port_only_from_the_clusters_etcd_pods(source: Source, allowed: bool) -> None:
    for access in (IN_CLUSTER, OUTSIDE):
        assert admits(np.network_policy(OWNER, ClusterSpec(), access), source, m.PEER_PORT) is allowed


def test_an_adopting_clusters_peer_port_admits_its_old_members_wherever_they_are() -> None:
    spec = attrs.evolve(ClusterSpec(), adopt=AdoptSpec(("https://old-0.old:2379",)))
    policy = np.network_policy(OWNER, spec, IN_CLUSTER)
    assert all(admits(policy, s, m.PEER_PORT) for s in (NEIGHBOUR, STRANGER, HOST))
    assert not admits(policy, STRANGER, m.CLIENT_PORT)


def test_the_client_port_from_the_namespace_and_the_operator_in_a_cluster() -> None:
    policy = np.network_policy(OWNER, ClusterSpec(), IN_CLUSTER)
    reach = [admits(policy, s, m.CLIENT_PORT) for s in (NEIGHBOUR, MEMBER, OPERATOR_POD, STRANGER, HOST)]
    assert reach == [True, True, True, False, False]
    # The operator's namespace alone is not enough: its pods, by their labels.
    assert not admits(policy, Source("etcd-supervisor", {"app": "other"}), m.CLIENT_PORT)


def test_an_operator_outside_the_cluster_is_admitted_by_its_address() -> None:
    policy = np.network_policy(OWNER, ClusterSpec(), OUTSIDE)
    assert admits(policy, HOST, m.CLIENT_PORT)
    assert not admits(policy, attrs.evolve(HOST, ip="10.245.0.2"), m.CLIENT_PORT)
    assert not admits(policy, HOST, m.PEER_PORT)


def test_client_selector_admits_its_pods_in_any_namespace_on_the_client_port_only() -> None:
    spec = attrs.evolve(ClusterSpec(), client_selector={"matchLabels": {"etcd-client": "demo"}})
    policy = np.network_policy(OWNER, spec, IN_CLUSTER)
    assert admits(policy, TENANT, m.CLIENT_PORT)
    assert admits(policy, attrs.evolve(TENANT, namespace=NS), m.CLIENT_PORT)
    assert not admits(policy, TENANT, m.PEER_PORT)
    assert not admits(policy, attrs.evolve(TENANT, labels={"etcd-client": "other"}), m.CLIENT_PORT)
    assert not admits(np.network_policy(OWNER, ClusterSpec(), IN_CLUSTER), TENANT, m.CLIENT_PORT)


def test_metrics_from_the_monitoring_namespace_when_told_else_from_the_clusters() -> None:
    default = np.network_policy(OWNER, ClusterSpec(), IN_CLUSTER)
    assert admits(default, NEIGHBOUR, m.METRICS_PORT) and not admits(default, PROMETHEUS, m.METRICS_PORT)
    told = np.network_policy(
        OWNER, ClusterSpec(), attrs.evolve(IN_CLUSTER, monitoring_namespace="monitoring")
    )
    assert admits(told, PROMETHEUS, m.METRICS_PORT) and not admits(told, NEIGHBOUR, m.METRICS_PORT)


@pytest.mark.parametrize("port", [GATE_PORT, RECEIVE_PORT])
def test_the_gate_and_the_snapshot_receiver_only_from_the_operator(port: int) -> None:
    for access, operator in ((IN_CLUSTER, OPERATOR_POD), (OUTSIDE, HOST)):
        policy = np.network_policy(OWNER, ClusterSpec(), access)
        assert admits(policy, operator, port)
        assert not any(admits(policy, s, port) for s in (NEIGHBOUR, MEMBER, STRANGER))
    nobody = np.network_policy(OWNER, ClusterSpec(), np.OperatorAccess())
    assert all(port not in [p["port"] for p in r["ports"]] for r in nobody["spec"]["ingress"])


def test_the_operators_labels_leave_the_rollout_hashes_out() -> None:
    labels = {"app": "etcd-supervisor", "pod-template-hash": "5d9c", "controller-revision-hash": "x"}
    assert np.operator_pod_labels(labels) == {"app": "etcd-supervisor"}


def test_the_policy_is_a_cluster_object_only_while_network_policy_is_on() -> None:
    def whats(spec: ClusterSpec) -> list[str]:
        made = objects.cluster_objects(spec, cluster_domain="cluster.local", now=lambda: None, access=OUTSIDE)  # type: ignore[arg-type,return-value]
        return [o.what for o in made]

    assert "NetworkPolicy" in whats(ClusterSpec())
    assert "NetworkPolicy" not in whats(attrs.evolve(ClusterSpec(), network_policy=False))


def _parse(security: Mapping[str, Any]) -> tuple[ClusterSpec, list[str]]:
    r = Reader()
    spec = parse_spec({"security": security}, r)
    return spec, [str(e) for e in r.errors]


def test_client_selector_is_read_as_a_label_selector() -> None:
    selector = {
        "matchLabels": {"etcd-client": "demo"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["api", "batch"]},
            {"key": "example.com/blocked", "operator": "DoesNotExist"},
        ],
    }
    spec, errors = _parse({"clientSelector": selector})
    assert errors == [] and spec.client_selector == selector
    assert _parse({})[0].client_selector is None
    assert _parse({"clientSelector": {}})[0].client_selector == {}  # every pod, any namespace


@pytest.mark.parametrize(
    "selector,error",
    [
        ("app=x", "spec.security.clientSelector: must be an object"),
        ({"podSelector": {}}, "spec.security.clientSelector.podSelector: unknown field"),
        ({"matchLabels": {"app": 5}}, 'spec.security.clientSelector.matchLabels["app"]: must be a string'),
        (
            {"matchLabels": {"-bad": "x"}},
            'spec.security.clientSelector.matchLabels["-bad"]: is not a valid key',
        ),
        ({"matchLabels": {"app": "a b"}}, 'spec.security.clientSelector.matchLabels["app"]: a label value'),
        (
            {"matchExpressions": [{"key": "tier", "operator": "Has"}]},
            "spec.security.clientSelector.matchExpressions[0].operator: must be one of In, NotIn",
        ),
        (
            {"matchExpressions": [{"key": "tier", "operator": "In"}]},
            "spec.security.clientSelector.matchExpressions[0].values: must be a non-empty list",
        ),
        (
            {"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["a"]}]},
            "spec.security.clientSelector.matchExpressions[0].values: must be empty with Exists",
        ),
        (
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"], "x": 1}]},
            "spec.security.clientSelector.matchExpressions[0].x: unknown field",
        ),
        (
            {"matchExpressions": {"key": "tier"}},
            "spec.security.clientSelector.matchExpressions: must be a list",
        ),
    ],
)
def test_a_bad_client_selector_names_the_field_and_the_rule(selector: Any, error: str) -> None:
    _, errors = _parse({"clientSelector": selector})
    assert any(e.startswith(error) for e in errors), errors


def test_locally_a_client_selector_is_reported_as_ignored() -> None:
    spec, _ = _parse({"clientSelector": {"matchLabels": {"a": "b"}}})
    assert "spec.security.clientSelector" in kubernetes_only(spec)
    # networkPolicy, on by default, has no network to police on loopback: nothing to report.
    assert kubernetes_only(ClusterSpec()) == ()

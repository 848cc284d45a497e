"""The prometheus-operator objects we ship (deploy/monitoring/ and the chart's, all enabled) are
created on a real API server holding prometheus-operator's own CRDs (from its Go module, see
tests/envtest/fetch-prometheus-crds.sh): their schemas take them, strictly (no unknown field),
and refuse a broken one. And they select what exists: the member pods and their metrics port,
the operator's Service and its http port."""

from __future__ import annotations

import copy
import re
import subprocess
from typing import Any

import yaml

from actors.model import ClusterRef
from supervisor.kube import manifests
from tests.harness.kube import REPO, KubeAPIServer, require_helm, require_prometheus_crds

DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "etcd-operator"
KINDS = {"PodMonitor", "ServiceMonitor", "PrometheusRule"}
ENABLE = (
    "monitoring.prometheusRule.enabled=true,monitoring.serviceMonitor.enabled=true,"
    "monitoring.podMonitor.enabled=true"
)


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def kept(wrote: Any, got: Any) -> bool:
    """Everything written is there as written (the server may add defaults beside it)."""
    if isinstance(wrote, dict):
        return isinstance(got, dict) and all(k in got and kept(v, got[k]) for k, v in wrote.items())
    if isinstance(wrote, list):
        return isinstance(got, list) and len(got) == len(wrote) and all(map(kept, wrote, got))
    return bool(wrote == got)


def chart(namespace: str) -> list[dict[str, Any]]:
    rendered = subprocess.run(
        [str(require_helm()), "template", "rel", str(CHART), "--namespace", namespace, "--set", ENABLE],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return docs(rendered)


def apply(server: KubeAPIServer, namespace: str, objs: list[dict[str, Any]], *, check: bool = True):  # type: ignore[no-untyped-def]
    return server.kubectl(
        "apply", "--server-side", "--validate=strict", "-n", namespace, "-f", "-",
        input=yaml.safe_dump_all(objs), check=check,
    )  # fmt: skip


def test_monitors_and_rules_are_valid_prometheus_operator_objects(kube_apiserver: KubeAPIServer) -> None:
    crds = require_prometheus_crds()
    kube_apiserver.kubectl("apply", "--server-side", "--force-conflicts", "-f", crds)
    for kind in ("podmonitors", "servicemonitors", "prometheusrules"):
        kube_apiserver.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", f"crd/{kind}.monitoring.coreos.com"
        )
    ns = kube_apiserver.create_namespace("monitors")
    rendered = chart(ns)
    from_chart = [o for o in rendered if o["kind"] in KINDS]
    plain = docs((DEPLOY / "monitoring" / "monitors.yaml").read_text()) + docs(
        (DEPLOY / "monitoring" / "prometheusrule.yaml").read_text()
    )
    for objs in (from_chart, plain):
        assert {o["kind"] for o in objs} == KINDS
        proc = apply(kube_apiserver, ns, objs)
        assert "Warning" not in proc.stderr, proc.stderr
        for o in objs:
            got = kube_apiserver.get_json(o["kind"].lower(), o["metadata"]["name"], namespace=ns)
            assert kept(o["spec"], got["spec"]), (o["kind"], got["spec"])  # nothing pruned or changed

    # The schemas are enforced: an unknown field, and a wrong type, are refused.
    typo = copy.deepcopy(next(o for o in plain if o["kind"] == "PodMonitor"))
    typo["metadata"]["name"] = "typo"
    typo["spec"]["podMetricsEndpoints"][0]["portt"] = "metrics"
    proc = apply(kube_apiserver, ns, [typo], check=False)
    assert proc.returncode != 0 and "portt" in proc.stderr, proc.stderr
    wrong = copy.deepcopy(next(o for o in plain if o["kind"] == "PrometheusRule"))
    wrong["metadata"]["name"] = "wrong"
    wrong["spec"]["groups"][0]["rules"][0]["for"] = "five minutes"
    proc = apply(kube_apiserver, ns, [wrong], check=False)
    assert proc.returncode != 0 and "for" in proc.stderr, proc.stderr

    # They select what exists: member pods (labels and the metrics port), the operator's Service.
    pod = manifests.member_labels(ClusterRef(ns, "demo"), "demo-0")
    kustomized = docs(kube_apiserver.kubectl("kustomize", DEPLOY).stdout)  # the base's labels added
    for objs, services in ((from_chart, rendered), (plain, kustomized)):
        monitor = next(o for o in objs if o["kind"] == "PodMonitor")["spec"]
        assert monitor["selector"]["matchLabels"].items() <= pod.items()
        (endpoint,) = monitor["podMetricsEndpoints"]
        assert endpoint["port"] == "metrics"  # the member container's port of that name (manifests.py)
        for relabel in endpoint["relabelings"]:
            for source in relabel.get("sourceLabels", []):
                if source.startswith("__meta_kubernetes_pod_label_"):
                    assert source in {
                        f"__meta_kubernetes_pod_label_{re.sub(r'[^a-zA-Z0-9]', '_', k)}" for k in pod
                    }
        service_monitor = next(o for o in objs if o["kind"] == "ServiceMonitor")["spec"]
        (service,) = [s for s in services if s["kind"] == "Service"]
        assert service_monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
        assert [e["port"] for e in service_monitor["endpoints"]] == ["http"]
        assert "http" in {p["name"] for p in service["spec"]["ports"]}

"""deploy/ as a real API server takes it: every object of `kubectl kustomize deploy/` is created
(not dry-run), the examples are valid, the operator's pod passes the namespace's restricted Pod
Security level, and its ServiceAccount can do what the operator needs and nothing it must not.
The Helm chart is checked against the base: structurally, and with `helm template` (helm pinned
and built once by tests/envtest/build-helm.sh, or $HELM) applied to the API server."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from supervisor.cli import build_parser
from tests.harness.kube import (
    OPERATOR_NAMESPACE,
    OPERATOR_SERVICE_ACCOUNT,
    REPO,
    KubeAPIServer,
    require_helm,
)

DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "etcd-operator"
EXAMPLES = sorted((DEPLOY / "examples").glob("etcdcluster-*.yaml"))


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def find(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (obj,) = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return obj


@pytest.fixture(scope="module")
def deployed(kube_apiserver: KubeAPIServer) -> tuple[KubeAPIServer, list[dict[str, Any]], str]:
    """deploy/ really applied; returns the server, the rendered objects and kubectl's stderr."""
    rendered = kube_apiserver.kubectl("kustomize", DEPLOY).stdout
    proc = kube_apiserver.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=rendered)
    kube_apiserver.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/etcdclusters.etcd.io")
    return kube_apiserver, docs(rendered), proc.stderr


OPEN_OBJECT = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def cert_manager_kinds(server: KubeAPIServer) -> None:
    """cert-manager's kinds the operator touches (issuerRef), as bare CRDs: `kubectl auth can-i`
    answers "no" for a kind the API server does not serve, whatever the RBAC says."""
    for kind, plural, scope in (
        ("Certificate", "certificates", "Namespaced"),
        ("CertificateRequest", "certificaterequests", "Namespaced"),
        ("Issuer", "issuers", "Namespaced"),
        ("ClusterIssuer", "clusterissuers", "Cluster"),
    ):
        crd = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.cert-manager.io"},
            "spec": {
                "group": "cert-manager.io",
                "names": {"kind": kind, "plural": plural},
                "scope": scope,
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
        server.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(crd))
        server.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", f"crd/{plural}.cert-manager.io"
        )


@pytest.fixture(scope="module")
def operator(deployed: tuple[KubeAPIServer, list[dict[str, Any]], str]) -> Path:
    """Kubeconfig of the operator's ServiceAccount, token from the TokenRequest API."""
    server = deployed[0]
    cert_manager_kinds(server)
    return server.service_account_kubeconfig(OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT, create=False)


def test_every_rendered_object_exists(deployed: tuple[KubeAPIServer, list[dict[str, Any]], str]) -> None:
    server, objs, _ = deployed
    kinds = {o["kind"] for o in objs}
    assert {
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    } <= kinds
    rendered = yaml.safe_dump_all(objs)
    names = server.kubectl("get", "-f", "-", "-o", "name", input=rendered).stdout.split()
    assert len(names) == len(objs)


def test_apply_drew_no_warnings(deployed: tuple[KubeAPIServer, list[dict[str, Any]], str]) -> None:
    # Deprecated APIs and "would violate PodSecurity" both surface as warnings here.
    assert "Warning" not in deployed[2], deployed[2]


def test_namespaced_objects_land_in_the_operator_namespace(
    deployed: tuple[KubeAPIServer, list[dict[str, Any]], str],
) -> None:
    cluster_scoped = {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for o in deployed[1]:
        want = None if o["kind"] in cluster_scoped else OPERATOR_NAMESPACE
        assert o["metadata"].get("namespace") == want, o["kind"]


def test_deployment_shape(deployed: tuple[KubeAPIServer, list[dict[str, Any]], str]) -> None:
    server = deployed[0]
    dep = server.get_json("deployment", "etcd-supervisor", namespace=OPERATOR_NAMESPACE)
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert dep["spec"]["replicas"] == 2  # leader + standby
    assert pod["serviceAccountName"] == OPERATOR_SERVICE_ACCOUNT
    assert c["image"] == "etcd-supervisor:dev" and c["imagePullPolicy"] == "IfNotPresent"
    assert c["command"] == ["etcd-supervisor"]
    # The arguments, with $(VAR) expanded from the ConfigMap as the kubelet would, are ones the
    # CLI accepts.
    config = server.get_json("configmap", "etcd-supervisor", namespace=OPERATOR_NAMESPACE)["data"]
    args = [re.sub(r"\$\((\w+)\)", lambda v: config[v.group(1)], a) for a in c["args"]]
    parsed = build_parser().parse_args(args)
    assert (parsed.command, parsed.cluster_domain, parsed.log_format) == ("run", "cluster.local", "json")
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"http": 8080}
    assert (c["livenessProbe"]["httpGet"]["path"], c["readinessProbe"]["httpGet"]["path"]) == (
        "/healthz",
        "/readyz",
    )
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["resources"]["requests"] and c["resources"]["limits"]
    env = {e["name"] for e in c["env"]}
    assert {"POD_NAME", "POD_NAMESPACE"} <= env  # leader-election identity


def test_operator_pod_passes_restricted_pod_security(
    deployed: tuple[KubeAPIServer, list[dict[str, Any]], str],
) -> None:
    """The namespace enforces the restricted profile; a pod made from the Deployment's template
    is admitted (no kubelet here, so it is created and never runs)."""
    server, objs, _ = deployed
    template = find(objs, "Deployment")["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pss-probe", "namespace": OPERATOR_NAMESPACE, "labels": {"probe": "pss"}},
        "spec": template["spec"],
    }
    proc = server.kubectl("create", "-f", "-", input=json.dumps(pod), check=False)
    try:
        assert proc.returncode == 0 and "Warning" not in proc.stderr, proc.stderr
    finally:
        server.kubectl(
            "delete", "pod", "pss-probe", "-n", OPERATOR_NAMESPACE, "--ignore-not-found", "--wait=false"
        )
    bad = json.loads(json.dumps(pod))
    bad["metadata"]["name"] = "pss-root"
    bad["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    # The check above means something only if the namespace really enforces the profile.
    proc = server.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
    assert proc.returncode != 0 and "violates PodSecurity" in proc.stderr, proc.stderr


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_is_created_without_warnings(
    deployed: tuple[KubeAPIServer, list[dict[str, Any]], str], kube_namespace: str, example: Path
) -> None:
    server = deployed[0]
    proc = server.kubectl("apply", "--validate=strict", "-n", kube_namespace, "-f", example)
    assert "Warning" not in proc.stderr, proc.stderr
    (doc,) = docs(example.read_text())
    got = server.get_json("etcdcluster", doc["metadata"]["name"], namespace=kube_namespace)
    # Nothing the user wrote was dropped or changed (the CRD's defaults may add fields beside it).
    assert written_as_is(doc["spec"], got["spec"]), (doc["spec"], got["spec"])


def written_as_is(wrote: Any, stored: Any) -> bool:
    """Whether everything in `wrote` is in `stored` unchanged; maps may have gained keys."""
    if isinstance(wrote, dict):
        return isinstance(stored, dict) and all(
            key in stored and written_as_is(value, stored[key]) for key, value in wrote.items()
        )
    return bool(wrote == stored)


# --- RBAC: what the operator's ServiceAccount may and may not do ---------------------------

# (verb, resource, flags) the operator needs.
ALLOWED = [
    *[(v, "etcdclusters.etcd.io", ["-A"]) for v in ("get", "list", "watch", "update", "patch")],
    *[
        (v, "etcdclusters.etcd.io", ["-n", "team-a", "--subresource=status"])
        for v in ("get", "update", "patch")
    ],
    ("update", "etcdclusters.etcd.io", ["-n", "team-a", "--subresource=finalizers"]),
    *[
        (v, r, ["-n", "team-a"])
        for r in ("pods", "persistentvolumeclaims", "services", "poddisruptionbudgets.policy")
        for v in ("create", "get", "list", "watch", "update", "patch", "delete")
    ],
    *[(v, "secrets", ["-n", "team-a"]) for v in ("create", "get", "list", "watch", "update", "delete")],
    *[
        (v, "networkpolicies.networking.k8s.io", ["-n", "team-a"])
        for v in ("create", "get", "update", "delete")
    ],
    *[(v, r, ["-n", "team-a"]) for r in ("events", "events.events.k8s.io") for v in ("create", "patch")],
    *[(v, "certificates.cert-manager.io", ["-n", "team-a"]) for v in ("create", "get", "update")],
    ("get", "issuers.cert-manager.io", ["-n", "team-a"]),
    ("get", "clusterissuers.cert-manager.io", []),
    *[(v, "leases.coordination.k8s.io", ["-n", OPERATOR_NAMESPACE]) for v in ("get", "create", "update")],
]

# What it must not do: the user's resources, cluster administration, privilege escalation.
DENIED = [
    ("create", "etcdclusters.etcd.io", ["-n", "team-a"]),
    ("delete", "etcdclusters.etcd.io", ["-n", "team-a"]),
    ("delete", "namespaces", []),
    ("create", "namespaces", []),
    ("get", "nodes", []),
    ("update", "customresourcedefinitions.apiextensions.k8s.io", []),
    ("create", "clusterroles.rbac.authorization.k8s.io", []),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", []),
    ("create", "rolebindings.rbac.authorization.k8s.io", ["-n", "team-a"]),
    ("create", "validatingadmissionpolicies.admissionregistration.k8s.io", []),
    ("create", "pods", ["-n", "team-a", "--subresource=exec"]),
    ("create", "serviceaccounts", ["-n", "team-a", "--subresource=token"]),
    ("create", "deployments.apps", ["-n", "team-a"]),
    ("create", "statefulsets.apps", ["-n", "team-a"]),
    ("patch", "secrets", ["-n", "team-a"]),
    ("create", "persistentvolumes", []),
    ("delete", "events", ["-n", "team-a"]),
    ("list", "networkpolicies.networking.k8s.io", ["-n", "team-a"]),
    # cert-manager: its Certificates are made and kept, never deleted by hand; issuers only read.
    ("delete", "certificates.cert-manager.io", ["-n", "team-a"]),
    ("create", "issuers.cert-manager.io", ["-n", "team-a"]),
    ("create", "certificaterequests.cert-manager.io", ["-n", "team-a"]),
    # Leader election only in its own namespace, and it never deletes the Lease.
    ("create", "leases.coordination.k8s.io", ["-n", "team-a"]),
    ("delete", "leases.coordination.k8s.io", ["-n", OPERATOR_NAMESPACE]),
    ("list", "leases.coordination.k8s.io", ["-n", OPERATOR_NAMESPACE]),
]


def can_i(server: KubeAPIServer, kubeconfig: Path, verb: str, resource: str, flags: list[str]) -> str:
    return server.kubectl(
        "auth", "can-i", verb, resource, *flags, kubeconfig=kubeconfig, check=False
    ).stdout.strip()


def test_operator_can_do_what_it_needs(
    deployed: tuple[KubeAPIServer, list[dict[str, Any]], str], operator: Path
) -> None:
    missing = [c for c in ALLOWED if can_i(deployed[0], operator, *c) != "yes"]
    assert missing == []


def test_operator_cannot_do_what_it_must_not(
    deployed: tuple[KubeAPIServer, list[dict[str, Any]], str], operator: Path
) -> None:
    granted = [c for c in DENIED if can_i(deployed[0], operator, *c) != "no"]
    assert granted == []


def test_operator_token_works_for_real_requests(
    deployed: tuple[KubeAPIServer, list[dict[str, Any]], str], operator: Path, kube_namespace: str
) -> None:
    """Not only can-i: real requests with the TokenRequest token succeed or are Forbidden."""
    server = deployed[0]
    who = json.loads(server.kubectl("auth", "whoami", "-o", "json", kubeconfig=operator).stdout)
    assert (
        who["status"]["userInfo"]["username"]
        == f"system:serviceaccount:{OPERATOR_NAMESPACE}:{OPERATOR_SERVICE_ACCOUNT}"
    )

    server.kubectl(
        "create",
        "-n",
        kube_namespace,
        "-f",
        "-",
        input=json.dumps(
            {"apiVersion": "etcd.io/v1alpha1", "kind": "EtcdCluster", "metadata": {"name": "c"}, "spec": {}}
        ),
    )
    as_operator = {"kubeconfig": operator}
    server.kubectl("get", "etcdclusters", "-A", **as_operator)
    server.kubectl(
        "patch",
        "etcdcluster",
        "c",
        "-n",
        kube_namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"phase":"Creating","readyReplicas":0}}',
        **as_operator,
    )
    server.kubectl(
        "create", "secret", "generic", "c-tls", "-n", kube_namespace, "--from-literal=k=v", **as_operator
    )
    server.kubectl("get", "secret", "c-tls", "-n", kube_namespace, **as_operator)
    server.kubectl(
        "create",
        "-n",
        OPERATOR_NAMESPACE,
        "-f",
        "-",
        **as_operator,
        input=json.dumps(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": f"probe-{kube_namespace}"},
                "spec": {"holderIdentity": "probe"},
            }
        ),
    )
    for forbidden in (
        ("delete", "namespace", kube_namespace),
        ("delete", "etcdcluster", "c", "-n", kube_namespace),
        ("get", "nodes"),
    ):
        proc = server.kubectl(*forbidden, check=False, **as_operator)
        assert proc.returncode != 0 and "Forbidden" in proc.stderr, proc.stderr


# --- the Helm chart mirrors the base --------------------------------------------------------


def strip_template(text: str) -> str:
    """Enough of Helm for structure checks: drop directive-only lines, stub inline actions."""
    lines = [line for line in text.splitlines() if not re.fullmatch(r"\s*\{\{-?.*?-?\}\}\s*", line)]
    return re.sub(r"\{\{-?.*?-?\}\}", "stub", "\n".join(lines))


def base_objects() -> list[dict[str, Any]]:
    return [
        d
        for p in sorted((DEPLOY / "base").glob("*.yaml"))
        if p.name != "kustomization.yaml"
        for d in docs(p.read_text())
    ]


def test_chart_rbac_rules_match_the_base() -> None:
    chart = docs(strip_template((CHART / "templates" / "rbac.yaml").read_text()))
    base = base_objects()
    for kind in ("ClusterRole", "Role"):
        assert find(chart, kind)["rules"] == find(base, kind)["rules"], kind


def test_chart_crd_is_the_crd() -> None:
    for crd in (REPO / "crds").glob("*.yaml"):
        if crd.name != "kustomization.yaml":
            assert (CHART / "crds" / crd.name).read_text() == crd.read_text(), (
                f"copy {crd} into {CHART / 'crds'}"
            )


def test_chart_defaults_match_the_base_deployment() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    dep = find(base_objects(), "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert f"{values['image']['repository']}:{values['image']['tag']}" == c["image"]
    assert values["image"]["pullPolicy"] == c["imagePullPolicy"]
    assert values["replicaCount"] == dep["spec"]["replicas"]
    assert values["resources"] == c["resources"]
    assert values["podSecurityContext"] == pod["securityContext"]
    assert values["securityContext"] == c["securityContext"]
    chart_dep = docs(strip_template((CHART / "templates" / "deployment.yaml").read_text()))[0]
    (chart_c,) = chart_dep["spec"]["template"]["spec"]["containers"]
    # The chart's optional --monitoring-namespace (monitoring.namespace) has no base counterpart.
    chart_c["args"] = [a for a in chart_c["args"] if not a.startswith("--monitoring-namespace")]
    for key in (
        "command",
        "args",
        "ports",
        "startupProbe",
        "livenessProbe",
        "readinessProbe",
        "volumeMounts",
    ):
        assert chart_c[key] == c[key], key
    assert [e["name"] for e in chart_c["env"]] == [e["name"] for e in c["env"]]

    # The same volumes of the same kinds (the chart's ConfigMap is named after the release).
    def shape(volumes: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
        return [(v["name"], sorted(k for k in v if k != "name")) for v in volumes]

    assert shape(chart_dep["spec"]["template"]["spec"]["volumes"]) == shape(pod["volumes"])
    config = find(base_objects(), "ConfigMap")["data"]
    assert (values["logLevel"], values["logFormat"], values["clusterDomain"]) == (
        config["LOG_LEVEL"],
        config["LOG_FORMAT"],
        config["CLUSTER_DOMAIN"],
    )


def test_helm_template_applies(kube_apiserver: KubeAPIServer) -> None:
    """`helm template` of the chart is really created, and grants the same rules as the base."""
    helm = require_helm()  # $HELM, else tests/envtest/build-helm.sh; skips, or fails when CI=true
    ns = kube_apiserver.create_namespace("helm")
    version = json.loads(kube_apiserver.kubectl("version", "-o", "json").stdout)["serverVersion"][
        "gitVersion"
    ]
    rendered = subprocess.run(
        [
            str(helm),
            "template",
            "rel",
            str(CHART),
            "--namespace",
            ns,
            "--include-crds",
            "--kube-version",
            version,
            "--set",
            "clusterDomain=corp.internal",
            "--set",
            "monitoring.namespace=monitoring",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    objs = docs(rendered)
    proc = kube_apiserver.kubectl(
        "apply", "--server-side", "--force-conflicts", "-n", ns, "-f", "-", input=rendered
    )
    assert "Warning" not in proc.stderr, proc.stderr
    kinds = {o["kind"] for o in objs}
    assert {
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    } <= kinds
    settings, dashboard = sorted(
        (o for o in objs if o["kind"] == "ConfigMap"), key=lambda o: o["metadata"]["name"]
    )
    assert settings["data"]["CLUSTER_DOMAIN"] == "corp.internal"
    (operator,) = find(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--monitoring-namespace=monitoring" in operator["args"]  # the clusters' NetworkPolicies
    # The Grafana dashboard, for Grafana's sidecar (README "Monitoring"), created for real too.
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["etcd-supervisor.json"])["uid"] == "etcd-supervisor"
    base = base_objects()
    for kind in ("ClusterRole", "Role"):
        assert find(objs, kind)["rules"] == find(base, kind)["rules"], kind
    sa = find(objs, "ServiceAccount")["metadata"]["name"]
    kubeconfig = kube_apiserver.service_account_kubeconfig(ns, sa, create=False)
    assert can_i(kube_apiserver, kubeconfig, "create", "leases.coordination.k8s.io", ["-n", ns]) == "yes"
    assert (
        can_i(kube_apiserver, kubeconfig, "patch", "etcdclusters.etcd.io", ["-A", "--subresource=status"])
        == "yes"
    )
    assert can_i(kube_apiserver, kubeconfig, "delete", "namespaces", []) == "no"


def test_backup_volume_options_mount_a_claim_in_the_operator(
    kube_apiserver: KubeAPIServer, tmp_path: Path
) -> None:
    """Local-store backups on Kubernetes: the chart's backupVolume and the kustomize component
    both give the operator container a claim at /var/lib/etcd-backups."""
    helm = require_helm()
    rendered = subprocess.run(
        [str(helm), "template", "rel", str(CHART), "--set", "backupVolume.enabled=true"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(DEPLOY / "base", overlay)],
                "components": [os.path.relpath(DEPLOY / "components" / "backup-volume", overlay)],
            }
        )
    )
    kustomized = kube_apiserver.kubectl("kustomize", overlay).stdout
    for objs in (docs(rendered), docs(kustomized)):
        claim = find(objs, "PersistentVolumeClaim")
        pod = find(objs, "Deployment")["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert {"name": "backups", "mountPath": "/var/lib/etcd-backups"} in container["volumeMounts"]
        volume = next(v for v in pod["volumes"] if v["name"] == "backups")
        assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"]

"""A cluster forms on three real nodes in a namespace that enforces the `restricted` Pod Security
Standard (issue 33): with `podTemplate.spec.securityContext.runAsNonRoot: true`, every pod the
operator makes there (members, warm pods) is admitted, and the kubelet runs the official image's
etcd as uid 65532 on local volumes (fsGroup hands them over; no root init container)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supervisor.kube.image_layout import NON_ROOT_UID
from tests.harness import members_on_nodes as on
from tests.harness.cluster import Cluster
from tests.harness.formation import etcd_cluster, wait_for

pytestmark = pytest.mark.slow


def test_a_cluster_forms_in_a_namespace_that_enforces_restricted(
    etcd_nodes: Cluster, nodes_namespace: str, nodes_operator: Path
) -> None:
    ns, name, cluster = nodes_namespace, "restricted", etcd_nodes
    cluster.kubectl(
        "label",
        "namespace",
        ns,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
        "--overwrite",
    )
    resource = etcd_cluster(name, cluster.etcd_version, tls=True)
    resource["spec"]["podTemplate"] = {"spec": {"securityContext": {"runAsNonRoot": True}}}
    cluster.apply([resource], namespace=ns)
    wait_for(f"{name} at three voters", lambda: on.at_full_size(cluster, ns, name, 3), 240, poll=1.0)

    def phase() -> str | None:
        return cluster.get_json("etcdcluster", name, namespace=ns).get("status", {}).get("phase")

    wait_for(f"{name} Running", lambda: phase() == "Running", 60, poll=1.0)
    for pod in on.live_members(cluster, ns, name):
        spec = pod["spec"]
        assert spec["securityContext"]["runAsUser"] == NON_ROOT_UID, spec["securityContext"]
        assert "initContainers" not in spec
    # The namespace really enforces the profile: a member pod with escalation allowed is refused.
    bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pss-bad", "namespace": ns}, "spec": spec}
    etcd = next(c for c in spec["containers"] if c["name"] == "etcd")
    etcd["securityContext"]["allowPrivilegeEscalation"] = True
    proc = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(bad), check=False)
    assert proc.returncode != 0 and "violates PodSecurity" in proc.stderr, proc.stderr
    refused = [
        ln for ln in nodes_operator.read_text(errors="replace").splitlines() if "violates PodSecurity" in ln
    ]
    assert not refused, refused[:3]

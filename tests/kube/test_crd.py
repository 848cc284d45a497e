"""The EtcdCluster CRD as a real kube-apiserver enforces it: rejections name the field and the
rule, defaults are filled in, spec.adopt cannot be added or changed later, even sizes draw a
warning from the ValidatingAdmissionPolicy, and the scale/status subresources and printer
columns work."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.harness.kube import REPO, KubeAPIServer
from tests.harness.poll import until
from tests.unit.test_pod_template import USER

ADMISSION = REPO / "deploy" / "admission"


def manifest(name: str, spec: dict[str, Any] | None, **extra: Any) -> str:
    obj: dict[str, Any] = {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name},
    }
    if spec is not None:
        obj["spec"] = spec
    obj.update(extra)
    # JSON, not YAML: a name like "n" or "y" must not turn into a boolean on the way.
    return json.dumps(obj)


@pytest.fixture(scope="module")
def server(kube_crds: KubeAPIServer) -> KubeAPIServer:
    """The session server with the CRDs and the even-size warning policy in force."""
    kube_crds.apply_kustomization(ADMISSION)
    # A new policy is enforced once the admission plugin has compiled it: probe with a
    # server-side dry run (which passes through admission) until the warning shows.
    probe = manifest("probe", {"size": 2})
    until(
        lambda: (
            kube_crds.kubectl("create", "--dry-run=server", "-n", "default", "-f", "-", input=probe).stderr
        ),
        lambda stderr: "Warning:" in stderr,
        within=60,
        every=0.5,
        what="the even-size ValidatingAdmissionPolicy in effect",
    )
    return kube_crds


def get(server: KubeAPIServer, ns: str, name: str) -> dict[str, Any]:
    return server.get_json("etcdcluster", name, namespace=ns)


EXPECTED_DEFAULT_SPEC = {
    "size": 3,
    "version": "3.6.16",
    "repository": "quay.io/coreos/etcd",
    "storage": {"size": "10Gi", "reclaimPolicy": "Retain"},
    "security": {
        "tls": {"enabled": True, "certificates": {"validity": "2160h", "caValidity": "87600h"}},
        "auth": {"enabled": False},
        "networkPolicy": True,
    },
    "debug": {"networkSidecar": False},
    "health": {"unresponsiveAfter": "30s"},
    "disasterRecovery": {"mode": "Manual"},
    "hibernate": False,
}


@pytest.mark.parametrize("spec", [{}, None], ids=["empty-spec", "no-spec"])
def test_defaults_are_applied(
    server: KubeAPIServer, kube_namespace: str, spec: dict[str, Any] | None
) -> None:
    server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("defaults", spec))
    assert get(server, kube_namespace, "defaults")["spec"] == EXPECTED_DEFAULT_SPEC


def test_partial_nested_objects_are_completed(server: KubeAPIServer, kube_namespace: str) -> None:
    spec = {"size": 5, "storage": {"storageClassName": "fast"}, "security": {}}
    server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("partial", spec))
    got = get(server, kube_namespace, "partial")["spec"]
    assert got["size"] == 5
    assert got["storage"] == {"size": "10Gi", "reclaimPolicy": "Retain", "storageClassName": "fast"}
    assert got["security"] == EXPECTED_DEFAULT_SPEC["security"]


def test_valid_full_spec_is_kept_as_written(server: KubeAPIServer, kube_namespace: str) -> None:
    spec = {
        "size": 7,
        "version": "3.4.34",
        "repository": "localhost:5000/mirror/bitnami/etcd",
        "storage": {"size": "512Mi", "storageClassName": "standard", "reclaimPolicy": "Delete"},
        "security": {
            "tls": {
                "enabled": False,
                "certificates": {"validity": "720h", "renewBefore": "240h", "caValidity": "43800h"},
            },
            "auth": {
                "enabled": False,
                "roles": [
                    {"name": "app-rw", "permissions": [{"type": "readwrite", "key": "/app/", "prefix": True}]}
                ],
                "users": [{"name": "app", "roles": ["app-rw"], "clientCertSecret": "app-etcd-client"}],
            },
            "networkPolicy": False,
        },
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": 1, "memory": "1Gi"}},
        "debug": {"networkSidecar": True},
        "health": {"unresponsiveAfter": "2m"},
        "backup": {
            "schedule": "0 */6 * * *",
            "retention": {"keep": 7, "maxAge": "168h"},
            "verify": True,
            "store": {"s3": {"bucket": "etcd-backups", "prefix": "etcd/", "credentialsSecret": "s3-creds"}},
            "encryption": {"keySecret": "backup-key"},
            "compression": "zstd",
        },
        "restore": {"store": {"gcs": {"bucket": "old-backups"}}, "key": "etcd/default/x/b.db"},
        "maintenance": {
            "defrag": {"schedule": "0 3 * * *", "fragmentationRatio": 0.5, "minReclaim": "64Mi"},
            "autoCompaction": {"mode": "revision", "retention": "10000"},
            "quotaBackendBytes": "8Gi",
        },
        "disasterRecovery": {"mode": "Manual"},
        "hibernate": True,
    }
    server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("full", spec))
    assert get(server, kube_namespace, "full")["spec"] == spec


def test_a_full_adopt_is_kept_as_written_and_remove_old_defaults_to_false(
    server: KubeAPIServer, kube_namespace: str
) -> None:
    spec = {
        "adopt": {
            "endpoints": ["https://old-0.old:2379", "https://10.0.0.7:2379", "https://[fd00::7]:2379"],
            "clientSecret": "old-client",
            "peerCASecret": "old-peer-ca",
            "removeOld": True,
        }
    }
    server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("adopting", spec))
    assert get(server, kube_namespace, "adopting")["spec"]["adopt"] == spec["adopt"]
    plain = {"adopt": {"endpoints": ["http://old-0.old:2379"]}}
    server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("plain", plain))
    assert get(server, kube_namespace, "plain")["spec"]["adopt"] == {
        "endpoints": ["http://old-0.old:2379"],
        "removeOld": False,
    }


# (spec, the field the message must name, a phrase of the rule)
REJECTED = {
    "size-0": ({"size": 0}, "spec.size", "between 1 and 9"),
    "size-10": ({"size": 10}, "spec.size", "less than or equal to 9"),
    "size-negative": ({"size": -3}, "spec.size", "greater than or equal to 1"),
    "size-string": ({"size": "three"}, "spec.size", "must be of type integer"),
    "size-float": ({"size": 2.5}, "spec.size", "must be of type integer"),
    "version-empty": ({"version": ""}, "spec.version", "MAJOR.MINOR.PATCH"),
    "version-v-prefix": ({"version": "v3.5.21"}, "spec.version", "without a leading 'v'"),
    "version-two-parts": ({"version": "3.5"}, "spec.version", "MAJOR.MINOR.PATCH"),
    "version-word": ({"version": "latest"}, "spec.version", "MAJOR.MINOR.PATCH"),
    "version-number": ({"version": 3.5}, "spec.version", "must be of type string"),
    "storage-negative": ({"storage": {"size": "-1Gi"}}, "spec.storage.size", "positive quantity"),
    "storage-zero": ({"storage": {"size": "0Gi"}}, "spec.storage.size", "positive quantity"),
    "storage-word": ({"storage": {"size": "ten gigs"}}, "spec.storage.size", "positive quantity"),
    "storage-milli": ({"storage": {"size": "100m"}}, "spec.storage.size", "positive quantity"),
    "storage-empty": ({"storage": {"size": ""}}, "spec.storage.size", "positive quantity"),
    "reclaim-unknown": (
        {"storage": {"reclaimPolicy": "Recycle"}},
        "spec.storage.reclaimPolicy",
        "Unsupported value",
    ),
    "repository-tag": ({"repository": "quay.io/coreos/etcd:v3.5.21"}, "spec.repository", "without a tag"),
    "repository-empty": ({"repository": ""}, "spec.repository", "at least 1 chars long"),
    "tls-string": (
        {"security": {"tls": {"enabled": "yes"}}},
        "spec.security.tls.enabled",
        "must be of type boolean",
    ),
    "etcd-options-owned": (
        {"etcdOptions": {"heartbeat-interval": "200", "data-dir": "/elsewhere"}},
        "spec.etcdOptions",
        "may not set a flag the supervisor sets itself",
    ),
    "etcd-options-number": (
        {"etcdOptions": {"heartbeat-interval": 200}},
        "spec.etcdOptions.heartbeat-interval",
        "must be of type string",
    ),
    "certificates-too-short": (
        {"security": {"tls": {"certificates": {"validity": "10s"}}}},
        "spec.security.tls.certificates.validity",
        "at least 30s",
    ),
    "certificates-renew-after-expiry": (
        {"security": {"tls": {"certificates": {"validity": "1h", "renewBefore": "2h"}}}},
        "spec.security.tls.certificates.renewBefore",
        "shorter than validity",
    ),
    "certificates-ca-shorter-than-leaves": (
        {"security": {"tls": {"certificates": {"validity": "100h", "caValidity": "50h"}}}},
        "spec.security.tls.certificates.caValidity",
        "longer than validity",
    ),
    "certificates-word": (
        {"security": {"tls": {"certificates": {"validity": "90 days"}}}},
        "spec.security.tls.certificates.validity",
        "should match",
    ),
    "resources-bad-quantity": (
        {"resources": {"requests": {"memory": "lots"}}},
        "spec.resources.requests.memory",
        "should match",
    ),
    "unresponsive-after-word": (
        {"health": {"unresponsiveAfter": "soon"}},
        "spec.health.unresponsiveAfter",
        "should match",
    ),
    "backup-two-stores": (
        {"backup": {"store": {"local": {"path": "/b"}, "s3": {"bucket": "abc"}}}},
        "spec.backup.store",
        "exactly one store",
    ),
    "backup-no-store": ({"backup": {"schedule": "* * * * *"}}, "spec.backup.store", "Required value"),
    "backup-schedule-six-fields": (
        {"backup": {"schedule": "0 0 */6 * * *", "store": {"local": {"path": "/b"}}}},
        "spec.backup.schedule",
        "should match",
    ),
    "quota-zero": (
        {"maintenance": {"quotaBackendBytes": "0"}},
        "spec.maintenance.quotaBackendBytes",
        "positive",
    ),
    "ratio-over-one": (
        {"maintenance": {"defrag": {"fragmentationRatio": 1.5}}},
        "spec.maintenance.defrag.fragmentationRatio",
        "less than or equal to 1",
    ),
    "compaction-revision-as-duration": (
        {"maintenance": {"autoCompaction": {"mode": "revision", "retention": "1h"}}},
        "spec.maintenance.autoCompaction",
        "whole number of revisions",
    ),
    "restore-key-without-store": (
        {"restore": {"key": "a.db"}},
        "spec.restore",
        "backupName, or both store and key",
    ),
    "adopt-no-endpoints": ({"adopt": {"endpoints": []}}, "spec.adopt.endpoints", "at least 1 items"),
    "adopt-ten-endpoints": (
        {"adopt": {"endpoints": [f"http://old-{i}:2379" for i in range(10)]}},
        "spec.adopt.endpoints",
        "must have at most 9 items",
    ),
    "adopt-endpoint-without-port": (
        {"adopt": {"endpoints": ["http://old-0.old"]}},
        "spec.adopt.endpoints",
        "URLs of a host and a port",
    ),
    "adopt-endpoint-with-path": (
        {"adopt": {"endpoints": ["http://old-0.old:2379/v3"]}},
        "spec.adopt.endpoints",
        "URLs of a host and a port",
    ),
    "adopt-endpoint-twice": (
        {"adopt": {"endpoints": ["http://old-0.old:2379", "http://old-0.old:2379"]}},
        "spec.adopt.endpoints[1]",
        "Duplicate value",
    ),
    "adopt-mixed-schemes": (
        {"adopt": {"endpoints": ["http://a:2379", "https://b:2379"], "clientSecret": "c"}},
        "spec.adopt.endpoints",
        "all http or all https",
    ),
    "adopt-https-without-client-secret": (
        {"adopt": {"endpoints": ["https://a:2379"]}},
        "spec.adopt.clientSecret",
        "required with https endpoints",
    ),
    "adopt-http-with-client-secret": (
        {"adopt": {"endpoints": ["http://a:2379"], "clientSecret": "c"}},
        "spec.adopt.clientSecret",
        "refused with http ones",
    ),
    "adopt-bad-secret-name": (
        {"adopt": {"endpoints": ["http://a:2379"], "peerCASecret": "Old_CA"}},
        "spec.adopt.peerCASecret",
        "should match",
    ),
    "adopt-with-restore": (
        {"adopt": {"endpoints": ["http://a:2379"]}, "restore": {"backupName": "b"}},
        "spec.adopt",
        "cannot be set together with spec.restore",
    ),
    "pod-template-owned-label": (
        {"podTemplate": {"metadata": {"labels": {"team": "a", "etcd.io/member": "demo-0"}}}},
        'spec.podTemplate.metadata.labels["etcd.io/member"]',
        "owned by the supervisor",
    ),
    "pod-template-selector-label": (
        {"podTemplate": {"metadata": {"labels": {"app.kubernetes.io/instance": "other"}}}},
        'spec.podTemplate.metadata.labels["app.kubernetes.io/instance"]',
        "owned by the supervisor",
    ),
    "pod-template-owned-annotation": (
        {"podTemplate": {"metadata": {"annotations": {"etcd.io/member-config": "x"}}}},
        'spec.podTemplate.metadata.annotations["etcd.io/member-config"]',
        "owned by the supervisor",
    ),
    "pod-template-containers": (
        {"podTemplate": {"spec": {"containers": [{"name": "etcd", "command": ["sh"]}]}}},
        "spec.podTemplate.spec.containers",
        "owned by the supervisor",
    ),
    "pod-template-volumes": (
        {"podTemplate": {"spec": {"volumes": [{"name": "data", "emptyDir": {}}]}}},
        "spec.podTemplate.spec.volumes",
        "the data and TLS volumes",
    ),
    "pod-template-toleration-operator": (
        {"podTemplate": {"spec": {"tolerations": [{"key": "k", "operator": "In"}]}}},
        "spec.podTemplate.spec.tolerations[0].operator",
        "Unsupported value",
    ),
    "pod-template-toleration-without-key": (
        {"podTemplate": {"spec": {"tolerations": [{"operator": "Equal", "value": "etcd"}]}}},
        "spec.podTemplate.spec.tolerations[0]",
        "needs a key unless its operator is Exists",
    ),
    "pod-template-toleration-seconds": (
        {
            "podTemplate": {
                "spec": {"tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]}
            }
        },
        "spec.podTemplate.spec.tolerations[0]",
        "applies to effect NoExecute only",
    ),
    "pod-template-spread-skew": (
        {
            "podTemplate": {
                "spec": {
                    "topologySpreadConstraints": [
                        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                    ]
                }
            }
        },
        "spec.podTemplate.spec.topologySpreadConstraints[0].maxSkew",
        "greater than or equal to 1",
    ),
    "pod-template-run-as-user": (
        {"podTemplate": {"spec": {"securityContext": {"runAsUser": "root"}}}},
        "spec.podTemplate.spec.securityContext.runAsUser",
        "must be of type integer",
    ),
}


def test_a_full_pod_template_is_kept_as_written(server: KubeAPIServer, kube_namespace: str) -> None:
    # Every field the model takes (the unit tests' template): the schema prunes none of it.
    spec = {"podTemplate": USER}
    server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("templated", spec))
    assert get(server, kube_namespace, "templated")["spec"]["podTemplate"] == USER


@pytest.mark.parametrize("spec,field,rule", REJECTED.values(), ids=REJECTED.keys())
def test_bad_spec_is_rejected_naming_field_and_rule(
    server: KubeAPIServer, kube_namespace: str, spec: dict[str, Any], field: str, rule: str
) -> None:
    proc = server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("bad", spec), check=False)
    assert proc.returncode != 0, f"accepted: {spec}"
    assert f"{field}:" in proc.stderr and rule in proc.stderr, proc.stderr
    assert server.kubectl("get", "etcdcluster", "bad", "-n", kube_namespace, check=False).returncode != 0


@pytest.mark.parametrize("name", ["a" * 51, "1st-cluster"], ids=["too-long", "leading-digit"])
def test_names_the_supervisor_cannot_build_on_are_rejected(
    server: KubeAPIServer, kube_namespace: str, name: str
) -> None:
    proc = server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest(name, {}), check=False)
    assert proc.returncode != 0 and "metadata.name must be at most 50" in proc.stderr, proc.stderr


def test_longest_allowed_name_is_accepted(server: KubeAPIServer, kube_namespace: str) -> None:
    server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("a" + "-b" * 24 + "c", {}))


@pytest.mark.parametrize("verb", ["create", "apply"])
def test_unknown_field_is_rejected_under_strict_validation(
    server: KubeAPIServer, kube_namespace: str, verb: str
) -> None:
    doc = manifest("typo", {"sise": 3, "storage": {"storageClass": "fast"}})
    proc = server.kubectl(verb, "--validate=strict", "-n", kube_namespace, "-f", "-", input=doc, check=False)
    assert proc.returncode != 0
    assert 'unknown field "spec.sise"' in proc.stderr, proc.stderr
    assert 'unknown field "spec.storage.storageClass"' in proc.stderr, proc.stderr


def test_unknown_status_field_is_rejected_under_strict_validation(
    server: KubeAPIServer, kube_namespace: str
) -> None:
    server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("st", {}))
    obj = get(server, kube_namespace, "st")
    obj["status"] = {"phase": "Running", "leader": "x"}
    proc = server.kubectl(
        "replace", "--subresource=status", "--validate=strict", "-f", "-", input=json.dumps(obj), check=False
    )
    assert proc.returncode != 0 and 'unknown field "status.leader"' in proc.stderr, proc.stderr


class TestAdoptIsReadOnlyWhileTheClusterIsCreated:
    """spec.adopt names the running cluster a new EtcdCluster's members join: a transition rule
    refuses to add it to, remove it from or change it on an existing resource, but for removeOld."""

    ADOPT = {"endpoints": ["http://old-0.old:2379"]}

    def patch(self, server: KubeAPIServer, ns: str, name: str, spec: dict[str, Any]) -> Any:
        patch = json.dumps({"spec": spec})
        return server.kubectl(
            "patch", "etcdcluster", name, "-n", ns, "--type=merge", "-p", patch, check=False
        )

    @pytest.mark.parametrize(
        "created,change",
        [
            ({}, {"adopt": ADOPT}),
            ({"adopt": ADOPT}, {"adopt": {"endpoints": ["http://old-1.old:2379"]}}),
            ({"adopt": ADOPT}, {"adopt": {"peerCASecret": "old-peer-ca"}}),
            ({"adopt": ADOPT}, {"adopt": None}),
        ],
        ids=["added", "endpoints-changed", "peer-ca-added", "removed"],
    )
    def test_adding_or_changing_it_is_refused(
        self, server: KubeAPIServer, kube_namespace: str, created: dict[str, Any], change: dict[str, Any]
    ) -> None:
        server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("adopt", created))
        before = get(server, kube_namespace, "adopt")["spec"]
        proc = self.patch(server, kube_namespace, "adopt", change)
        assert proc.returncode != 0, "accepted"
        assert "spec.adopt:" in proc.stderr and "read only while the cluster is created" in proc.stderr, (
            proc.stderr
        )
        assert get(server, kube_namespace, "adopt")["spec"] == before

    def test_remove_old_and_other_edits_are_accepted(
        self, server: KubeAPIServer, kube_namespace: str
    ) -> None:
        server.kubectl(
            "create", "-n", kube_namespace, "-f", "-", input=manifest("adopted", {"adopt": self.ADOPT})
        )
        proc = self.patch(server, kube_namespace, "adopted", {"size": 5})
        assert proc.returncode == 0, proc.stderr
        proc = self.patch(server, kube_namespace, "adopted", {"adopt": {"removeOld": True}})
        assert proc.returncode == 0, proc.stderr
        spec = get(server, kube_namespace, "adopted")["spec"]
        assert spec["adopt"]["removeOld"] is True and spec["size"] == 5


class TestStorageChangesAreAccepted:
    """A storage class or size change is the supervisor's to roll out (a new member on a new
    volume at a time): the API server takes it as any other edit."""

    def patch(self, server: KubeAPIServer, ns: str, name: str, storage: dict[str, Any]) -> Any:
        return server.kubectl(
            "patch",
            "etcdcluster",
            name,
            "-n",
            ns,
            "--type=merge",
            "-p",
            json.dumps({"spec": {"storage": storage}}),
            check=False,
        )

    @pytest.mark.parametrize(
        "change",
        [{"storageClassName": "slow"}, {"storageClassName": None}, {"size": "20Gi"}],
        ids=["changed", "removed", "resized"],
    )
    def test_a_set_class_or_the_size_can_change(
        self, server: KubeAPIServer, kube_namespace: str, change: dict[str, Any]
    ) -> None:
        server.kubectl(
            "create",
            "-n",
            kube_namespace,
            "-f",
            "-",
            input=manifest("sc", {"storage": {"storageClassName": "fast"}}),
        )
        proc = self.patch(server, kube_namespace, "sc", change)
        assert proc.returncode == 0, proc.stderr
        storage = get(server, kube_namespace, "sc")["spec"]["storage"]
        assert {k: storage.get(k) for k in change} == change

    def test_an_absent_class_can_be_set_later(self, server: KubeAPIServer, kube_namespace: str) -> None:
        server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("nosc", {}))
        proc = self.patch(server, kube_namespace, "nosc", {"storageClassName": "fast"})
        assert proc.returncode == 0, proc.stderr


def test_even_size_is_accepted_with_a_warning(server: KubeAPIServer, kube_namespace: str) -> None:
    proc = server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("even", {"size": 4}))
    assert "Warning:" in proc.stderr and "spec.size is 4" in proc.stderr, proc.stderr
    assert get(server, kube_namespace, "even")["spec"]["size"] == 4


def test_odd_and_default_sizes_draw_no_warning(server: KubeAPIServer, kube_namespace: str) -> None:
    for name, spec in [("odd", {"size": 5}), ("dflt", {})]:
        proc = server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest(name, spec))
        assert "Warning" not in proc.stderr, proc.stderr


def test_scale_subresource_changes_spec_size(server: KubeAPIServer, kube_namespace: str) -> None:
    server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("sc", {}))
    proc = server.kubectl("scale", "etcdcluster/sc", "-n", kube_namespace, "--replicas=5")
    assert "Warning" not in proc.stderr, proc.stderr
    assert get(server, kube_namespace, "sc")["spec"]["size"] == 5
    # The same advice through the scale subresource as through the object itself.
    proc = server.kubectl("scale", "etcdcluster/sc", "-n", kube_namespace, "--replicas=6")
    assert "Warning:" in proc.stderr and "spec.size is 6" in proc.stderr, proc.stderr
    # And the same limits.
    proc = server.kubectl("scale", "etcdcluster/sc", "-n", kube_namespace, "--replicas=10", check=False)
    assert proc.returncode != 0 and "spec.size" in proc.stderr, proc.stderr
    assert get(server, kube_namespace, "sc")["spec"]["size"] == 6


def set_status(server: KubeAPIServer, ns: str, name: str, status: dict[str, Any], check: bool = True) -> Any:
    return server.kubectl(
        "patch",
        "etcdcluster",
        name,
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
        check=check,
    )


def test_status_is_a_subresource(server: KubeAPIServer, kube_namespace: str) -> None:
    # Status written with the object is dropped: only the status endpoint sets it.
    server.kubectl(
        "create",
        "-n",
        kube_namespace,
        "-f",
        "-",
        input=manifest("st", {}, status={"phase": "Running", "readyReplicas": 3}),
    )
    assert "status" not in get(server, kube_namespace, "st")
    status = {
        "phase": "Running",
        "readyReplicas": 3,
        "observedGeneration": 1,
        "message": "3 of 3 members healthy",
        "members": [
            {
                "name": "st-0",
                "id": "8e9e05c52164694d",
                "peerURL": "https://st-0.st-peer:2380",
                "clientURL": "https://st-0.st-peer:2379",
                "role": "leader",
                "healthy": True,
            },
            {
                "name": "st-1",
                "id": "91bc3c398fb3c146",
                "peerURL": "https://st-1.st-peer:2380",
                "clientURL": "https://st-1.st-peer:2379",
                "role": "learner",
                "healthy": False,
                "pid": None,
            },
        ],
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "QuorumHealthy",
                "message": "",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            }
        ],
    }
    set_status(server, kube_namespace, "st", status)
    got = get(server, kube_namespace, "st")["status"]
    assert got["phase"] == "Running" and got["members"][0]["role"] == "leader"
    # The scale subresource reports ready members as its status replicas.
    scale = json.loads(
        server.kubectl(
            "get", "--raw", f"/apis/etcd.io/v1alpha1/namespaces/{kube_namespace}/etcdclusters/st/scale"
        ).stdout
    )
    assert scale["spec"]["replicas"] == 3 and scale["status"]["replicas"] == 3


@pytest.mark.parametrize(
    "status,field",
    [
        ({"phase": "Degraded"}, "status.phase"),
        ({"readyReplicas": -1}, "status.readyReplicas"),
        ({"members": [{"name": "m", "role": "boss"}]}, "status.members[0].role"),
        ({"conditions": [{"type": "Ready", "status": "Maybe"}]}, "status.conditions[0].status"),
    ],
    ids=["phase", "ready", "role", "condition-status"],
)
def test_bad_status_is_rejected(
    server: KubeAPIServer, kube_namespace: str, status: dict[str, Any], field: str
) -> None:
    server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("bs", {}))
    proc = set_status(server, kube_namespace, "bs", status, check=False)
    assert proc.returncode != 0 and f"{field}:" in proc.stderr, proc.stderr


def test_printer_columns_short_name_and_category(server: KubeAPIServer, kube_namespace: str) -> None:
    server.kubectl(
        "create", "-n", kube_namespace, "-f", "-", input=manifest("pc", {"size": 5, "version": "3.5.17"})
    )
    set_status(server, kube_namespace, "pc", {"phase": "Scaling", "readyReplicas": 4, "version": "3.4.0"})
    for resource in ("etcdclusters", "etcdc", "etcd"):
        lines = server.kubectl("get", resource, "-n", kube_namespace).stdout.splitlines()
        assert lines[0].split() == ["NAME", "PHASE", "READY", "SIZE", "VERSION", "RUNNING", "AGE"], resource
        # The version asked for, and the cluster version the members speak (mid-upgrade here).
        # The category holds EtcdBackups too, so kubectl names each row's kind there.
        name = "etcdcluster.etcd.io/pc" if resource == "etcd" else "pc"
        assert lines[1].split()[:6] == [name, "Scaling", "4", "5", "3.5.17", "3.4.0"], resource


def test_the_database_size_column_shows_in_the_wide_listing(
    server: KubeAPIServer, kube_namespace: str
) -> None:
    server.kubectl("create", "-n", kube_namespace, "-f", "-", input=manifest("db", {"size": 3}))
    set_status(server, kube_namespace, "db", {"phase": "Running", "readyReplicas": 3, "dbSize": "180.2Mi"})
    narrow = server.kubectl("get", "etcdclusters", "-n", kube_namespace).stdout.splitlines()
    assert "DB" not in narrow[0].split()  # priority 1: only with -o wide
    wide = server.kubectl("get", "etcdclusters", "-n", kube_namespace, "-o", "wide").stdout.splitlines()
    column = wide[0].index("DB")  # kubectl aligns the columns (an empty one has no word)
    assert wide[1][column:].split()[0] == "180.2Mi", wide

"""spec.podTemplate: the codec's refusals by name, the merge into member, warm, verify and restore
pods (pure functions: inputs untouched), the members' fingerprint, the CRD in step with the lists
of what the supervisor owns, and the local runtime's SpecIgnored condition."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from actors.assess import ignored_condition
from actors.codec import InvalidCluster, parse_cluster
from actors.model import ClusterSpec, MemberConfig, PodMetadata, PodSettings, PodTemplate
from actors.observed import Observed
from actors.pod_template import (
    OWNED_ANNOTATIONS,
    OWNED_LABELS,
    OWNED_PREFIX,
    OWNED_SPEC_FIELDS,
    kubernetes_only,
    owned_annotation,
    owned_label,
)
from supervisor.etcd.member_settings import config_fingerprint
from supervisor.kube import manifests as m
from supervisor.kube import snapshot_pods as pods
from supervisor.kube import warm_members as warm
from supervisor.kube.pod_template import merge_member_pod, merge_snapshot_pod
from tests.unit.test_kube_manifests import OWNER, REF, launch

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "crds" / "etcdclusters.etcd.io.yaml"
HELM_CRD = REPO / "deploy" / "helm" / "etcd-operator" / "crds" / "etcdclusters.etcd.io.yaml"


def cluster(template: object) -> dict[str, Any]:
    return {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "demo"},
        "spec": {"podTemplate": template},
    }


def refusals(template: object) -> list[str]:
    with pytest.raises(InvalidCluster) as caught:
        parse_cluster(cluster(template))
    return [str(e) for e in caught.value.errors]


USER = {
    "metadata": {"labels": {"team": "storage"}, "annotations": {"example.com/owner": "platform"}},
    "spec": {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"team": "storage"}},
                    }
                ]
            },
        },
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "etcd", "effect": "NoSchedule"}],
        "nodeSelector": {"node-role.example.com/etcd": ""},
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
        ],
        "priorityClassName": "etcd-critical",
        "imagePullSecrets": [{"name": "mirror-creds"}],
        "securityContext": {"runAsUser": 1000, "fsGroup": 2000, "runAsNonRoot": True},
        "runtimeClassName": "gvisor",
    },
}


def user_template() -> PodTemplate:
    return parse_cluster(cluster(USER)).spec.pod_template


# --- codec -----------------------------------------------------------------------------------------


def test_a_full_template_reads_as_written() -> None:
    template = user_template()
    assert template.metadata == PodMetadata(
        labels={"team": "storage"}, annotations={"example.com/owner": "platform"}
    )
    assert template.spec.tolerations == tuple(USER["spec"]["tolerations"])  # type: ignore[index]
    assert template.spec.image_pull_secrets == ("mirror-creds",)
    assert template.spec.security_context == {"runAsUser": 1000, "fsGroup": 2000, "runAsNonRoot": True}
    assert (
        template.spec.priority_class_name == "etcd-critical" and template.spec.runtime_class_name == "gvisor"
    )
    assert template.is_set and not parse_cluster(cluster(None)).spec.pod_template.is_set
    assert not parse_cluster(cluster({})).spec.pod_template.is_set


def test_what_the_supervisor_owns_is_refused_by_name_every_one_at_once() -> None:
    errors = refusals(
        {
            "metadata": {
                "labels": {"team": "a", "etcd.io/cluster": "x", "app.kubernetes.io/instance": "other"},
                "annotations": {"etcd.io/member-config": "x", "kubectl.kubernetes.io/default-container": "x"},
            },
            "spec": {"containers": [], "volumes": [], "hostname": "x", "restartPolicy": "Always"},
        }
    )
    assert 'spec.podTemplate.metadata.labels["etcd.io/cluster"]: owned by the supervisor' in errors
    assert 'spec.podTemplate.metadata.labels["app.kubernetes.io/instance"]: owned by the supervisor' in errors
    assert 'spec.podTemplate.metadata.annotations["etcd.io/member-config"]: owned by the supervisor' in errors
    default_container = 'annotations["kubectl.kubernetes.io/default-container"]: owned by the supervisor'
    assert f"spec.podTemplate.metadata.{default_container}" in errors
    spec_errors = {e.split(":")[0]: e for e in errors if e.startswith("spec.podTemplate.spec.")}
    assert set(spec_errors) == {
        f"spec.podTemplate.spec.{n}" for n in ("containers", "volumes", "hostname", "restartPolicy")
    }
    assert "data and TLS volumes" in spec_errors["spec.podTemplate.spec.volumes"]
    assert "owned by the supervisor" in spec_errors["spec.podTemplate.spec.containers"]


@pytest.mark.parametrize(
    "template,expected",
    [
        (
            {"spec": {"hostAliases": []}},
            r"spec.podTemplate.spec.hostAliases: unknown field \(podTemplate.spec takes affinity, ",
        ),
        ({"metadata": {"name": "x"}}, r"spec.podTemplate.metadata.name: unknown field"),
        ({"kind": "Pod"}, r"spec.podTemplate.kind: unknown field"),
        ({"metadata": {"labels": {"team": 3}}}, r'labels\["team"\]: must be a string \(got 3\)'),
        ({"metadata": {"labels": {"team": "a b"}}}, r'labels\["team"\]: a label value is at most 63'),
        ({"metadata": {"labels": {"-bad": "a"}}}, r'labels\["-bad"\]: is not a valid key'),
        (
            {"spec": {"tolerations": [{"key": "k", "operator": "In"}]}},
            r"tolerations\[0\].operator: must be Exists or Equal",
        ),
        (
            {"spec": {"tolerations": [{"operator": "Exists", "value": "v"}]}},
            r"tolerations\[0\].value: must be empty",
        ),
        ({"spec": {"tolerations": [{"value": "v"}]}}, r"tolerations\[0\].key: is needed with operator Equal"),
        (
            {"spec": {"tolerations": [{"key": "k", "effect": "Sometimes"}]}},
            r"tolerations\[0\].effect: must be NoSchedule",
        ),
        (
            {"spec": {"tolerations": [{"key": "k", "tolerationSeconds": 5}]}},
            r"tolerationSeconds: applies to effect NoExecute",
        ),
        ({"spec": {"tolerations": [{"key": "k", "colour": "x"}]}}, r"tolerations\[0\].colour: unknown field"),
        ({"spec": {"tolerations": {"key": "k"}}}, r"spec.podTemplate.spec.tolerations: must be a list"),
        ({"spec": {"nodeSelector": {"disk": 1}}}, r'nodeSelector\["disk"\]: must be a string'),
        (
            {
                "spec": {
                    "topologySpreadConstraints": [
                        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                    ]
                }
            },
            r"topologySpreadConstraints\[0\].maxSkew: must be an integer of at least 1",
        ),
        (
            {
                "spec": {
                    "topologySpreadConstraints": [
                        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}
                    ]
                }
            },
            r"topologySpreadConstraints\[0\].whenUnsatisfiable: must be DoNotSchedule or ScheduleAnyway",
        ),
        (
            {"spec": {"priorityClassName": "High Priority"}},
            r"spec.podTemplate.spec.priorityClassName: must be the name",
        ),
        ({"spec": {"runtimeClassName": 3}}, r"spec.podTemplate.spec.runtimeClassName: must be a string"),
        (
            {"spec": {"imagePullSecrets": ["creds"]}},
            r"spec.podTemplate.spec.imagePullSecrets\[0\]: must be an object",
        ),
        (
            {"spec": {"imagePullSecrets": [{"name": "Creds"}]}},
            r"imagePullSecrets\[0\].name: must be the name of a Secret",
        ),
        (
            {"spec": {"imagePullSecrets": [{"name": "c", "namespace": "x"}]}},
            r"imagePullSecrets\[0\].namespace: unknown field",
        ),
        (
            {"spec": {"securityContext": {"runAsUser": "root"}}},
            r"securityContext.runAsUser: must be a non-negative integer",
        ),
        ({"spec": {"securityContext": {"privileged": True}}}, r"securityContext.privileged: unknown field"),
        ({"spec": {"affinity": {"nodeAffinity": []}}}, r"affinity.nodeAffinity: must be an object"),
        ({"spec": {"affinity": {"podAffinityTerm": {}}}}, r"affinity.podAffinityTerm: unknown field"),
        ({"spec": []}, r"spec.podTemplate.spec: must be an object"),
    ],
)
def test_a_broken_rule_names_the_field_and_the_rule(template: object, expected: str) -> None:
    errors = refusals(template)
    assert any(re.search(expected, e) for e in errors), errors


def test_every_label_and_annotation_the_supervisor_puts_on_its_pods_is_owned() -> None:
    spec = ClusterSpec(tls_enabled=True)
    member = m.member_pod(OWNER, launch(spec), voter=True, trust="digest", consecutive_failures=2)
    made = [
        member,
        warm.warm_pod(OWNER, member, helper_image="img", token="t"),
        m.member_volume_claim(OWNER, spec, "main-0", launch(spec).urls),
        warm.warm_claim(OWNER, launch(spec)),
        pods.verify_pod(OWNER, spec, name="v", helper_image="img", token="t"),
        pods.restore_pod(OWNER, launch(spec), name="r", helper_image="img", token="t", cluster_token="c"),
    ]
    labels = {k for obj in made for k in obj["metadata"]["labels"]}
    annotations = {k for obj in made for k in obj["metadata"].get("annotations", {})}
    assert {k for k in labels if not owned_label(k)} == set()
    assert {k for k in annotations if not owned_annotation(k)} == set()


# --- the merge -----------------------------------------------------------------------------------


def test_no_template_leaves_every_pod_as_the_supervisor_builds_it() -> None:
    pod = m.member_pod(OWNER, launch(ClusterSpec()))
    assert merge_member_pod(pod, PodTemplate()) == pod
    assert merge_snapshot_pod(pod, PodTemplate()) == pod


def test_a_member_pod_takes_the_whole_template_combined_with_the_supervisors_own() -> None:
    template = user_template()
    plain = m.member_pod(OWNER, launch(ClusterSpec(repository="bitnami/etcd")))
    before = copy.deepcopy(plain)
    pod = merge_member_pod(plain, template)
    assert plain == before, "the merge changed its input"
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["labels"] == {**plain["metadata"]["labels"], "team": "storage"}
    assert meta["annotations"] == {**plain["metadata"]["annotations"], "example.com/owner": "platform"}
    assert spec["tolerations"] == USER["spec"]["tolerations"]  # type: ignore[index]
    assert spec["nodeSelector"] == {"node-role.example.com/etcd": ""}
    assert spec["priorityClassName"] == "etcd-critical" and spec["runtimeClassName"] == "gvisor"
    assert spec["imagePullSecrets"] == [{"name": "mirror-creds"}]
    # The user's fields over ours: bitnami's fsGroup 1001 gives way to the user's 2000.
    assert plain["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 1001}
    assert spec["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "fsGroup": 2000,
        "runAsUser": 1000,
        "runAsNonRoot": True,
    }
    affinity = spec["affinity"]
    assert affinity["nodeAffinity"] == USER["spec"]["affinity"]["nodeAffinity"]  # type: ignore[index]
    # Anti-affinity: ours (prefer other hosts) kept, the user's required term added.
    ours = plain["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == ours
    assert (
        affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        == USER["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]  # type: ignore[index]
    )
    # Spreading: the user's zone constraint replaces ours on the zone (never two on one key).
    assert spec["topologySpreadConstraints"] == USER["spec"]["topologySpreadConstraints"]  # type: ignore[index]
    # What the supervisor owns is as it was.
    owned = ("containers", "initContainers", "volumes", "hostname", "subdomain", "restartPolicy", "dnsConfig")
    for key in owned:
        assert spec[key] == plain["spec"][key]


def test_spreading_over_another_key_keeps_the_supervisors_zone_spread_and_preferences_add_up() -> None:
    extra = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}
    preferred = {"weight": 10, "podAffinityTerm": {"topologyKey": "rack", "labelSelector": {}}}
    template = PodTemplate(
        spec=PodSettings(
            topology_spread_constraints=(extra,),
            affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [preferred]}},
        )
    )
    plain = m.member_pod(OWNER, launch(ClusterSpec()))
    pod = merge_member_pod(plain, template)
    assert pod["spec"]["topologySpreadConstraints"] == [*plain["spec"]["topologySpreadConstraints"], extra]
    terms = pod["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    ours = plain["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert terms == [*ours, preferred]


def test_warm_pods_keep_the_template_and_the_users_labels_through_adoption() -> None:
    spec = ClusterSpec(pod_template=user_template())
    member = m.member_pod(OWNER, launch(spec))
    pod = warm.warm_pod(OWNER, member, helper_image="img", token="t")
    assert pod["metadata"]["labels"]["team"] == "storage"
    assert pod["spec"]["tolerations"] == member["spec"]["tolerations"]
    assert pod["spec"]["affinity"] == member["spec"]["affinity"]
    patch = warm.adoption_patch(REF, "main-0")
    adopted = {**pod["metadata"]["labels"], **patch["metadata"]["labels"]}
    # The merge patch (null deletes); the voter label is the runtime's to set after adoption.
    adopted = {k: v for k, v in adopted.items() if v is not None}
    assert adopted == {k: v for k, v in member["metadata"]["labels"].items() if k != m.VOTER_LABEL}


@pytest.mark.parametrize("which", ["verify", "restore"])
def test_verify_and_restore_pods_run_where_members_may_run(which: str) -> None:
    spec = ClusterSpec(pod_template=user_template())
    if which == "verify":
        pod = pods.verify_pod(OWNER, spec, name="v", helper_image="img", token="t")
    else:
        pod = pods.restore_pod(
            OWNER, launch(spec), name="r", helper_image="img", token="t", cluster_token="c"
        )
    member = m.member_pod(OWNER, launch(spec))
    for key in (
        "tolerations",
        "nodeSelector",
        "priorityClassName",
        "runtimeClassName",
        "imagePullSecrets",
        "securityContext",
    ):
        assert pod["spec"][key] == member["spec"][key], key
    # The node part of affinity only: pod (anti-)affinity and spreading are about members.
    assert pod["spec"]["affinity"] == {"nodeAffinity": member["spec"]["affinity"]["nodeAffinity"]}
    assert "topologySpreadConstraints" not in pod["spec"]
    assert "team" not in pod["metadata"]["labels"] and "annotations" not in pod["metadata"]


# --- rollout: the fingerprint ------------------------------------------------------------------------


def test_without_a_template_the_fingerprint_is_the_one_pods_were_made_with_before() -> None:
    for spec in (
        ClusterSpec(),
        ClusterSpec(repository="bitnami/etcd", version="3.5.17"),
        ClusterSpec(tls_enabled=False),
    ):
        # The formula of the release before podTemplate: etcd settings and the image.
        assert m.member_config(spec).fingerprint == config_fingerprint(spec, spec.image)


def test_any_template_change_is_a_new_fingerprint_so_the_members_roll() -> None:
    base = ClusterSpec()
    variants = [
        PodTemplate(metadata=PodMetadata(labels={"team": "a"})),
        PodTemplate(metadata=PodMetadata(labels={"team": "b"})),
        PodTemplate(metadata=PodMetadata(annotations={"x": "1"})),
        PodTemplate(spec=PodSettings(tolerations=({"key": "k", "operator": "Exists"},))),
        PodTemplate(spec=PodSettings(node_selector={"disk": "ssd"})),
        PodTemplate(spec=PodSettings(priority_class_name="high")),
    ]
    prints = {m.member_config(attrs.evolve(base, pod_template=t)).fingerprint for t in variants}
    assert len(prints) == len(variants) and m.member_config(base).fingerprint not in prints
    # The same template read twice is the same fingerprint (no restart on a re-read).
    again = parse_cluster(cluster(USER)).spec
    assert m.member_config(again) == m.member_config(ClusterSpec(pod_template=user_template()))


# --- locally: accepted, reported as ignored ------------------------------------------------------------


def test_the_condition_names_what_the_runtime_ignores() -> None:
    spec = ClusterSpec(pod_template=user_template())
    assert kubernetes_only(spec) == ("spec.podTemplate",) and kubernetes_only(ClusterSpec()) == ()

    def observed(config: MemberConfig) -> Observed:
        return Observed(cluster=REF, runtime=(), etcd_members=None, health={}, desired=config)

    condition = ignored_condition(observed(MemberConfig("f", ignored=kubernetes_only(spec))))
    assert condition is not None
    assert (condition.type, condition.status, condition.reason) == ("SpecIgnored", "True", "KubernetesOnly")
    assert condition.message.startswith("spec.podTemplate applies on Kubernetes only")
    assert ignored_condition(observed(MemberConfig("f"))) is None


def test_resources_a_storage_class_and_the_sidecar_are_kubernetes_only_too() -> None:
    from actors.model import ResourceSpec, StorageSpec

    spec = ClusterSpec(
        resources=ResourceSpec(requests={"cpu": "100m"}),
        storage=StorageSpec(storage_class_name="fast"),
        debug_sidecar=True,
    )
    assert kubernetes_only(spec) == (
        "spec.resources",
        "spec.storage.storageClassName",
        "spec.debug.networkSidecar",
    )


# --- the CRD ---------------------------------------------------------------------------------------


def test_the_helm_chart_carries_the_same_crd() -> None:
    assert HELM_CRD.read_text() == CRD.read_text()


def test_the_crds_rules_refuse_exactly_what_the_codec_refuses() -> None:
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    template = schema["properties"]["spec"]["properties"]["podTemplate"]["properties"]
    for name, owned, prefix in (
        ("labels", OWNED_LABELS, OWNED_PREFIX),
        ("annotations", OWNED_ANNOTATIONS, OWNED_PREFIX),
    ):
        (rule,) = template["metadata"]["properties"][name]["x-kubernetes-validations"]
        listed = re.search(r"k in \[([^\]]*)\]", rule["rule"])
        assert listed, rule
        assert [n.strip().strip("'") for n in listed.group(1).split(",")] == list(owned)
        assert f"k.startsWith('{prefix}')" in rule["rule"]
        owned_test = rule["rule"].removeprefix("self.all(k, !(").removesuffix("))")
        assert f"self.filter(k, {owned_test})[0]" in rule["messageExpression"]
    rules = {r["rule"]: r["message"] for r in template["spec"]["x-kubernetes-validations"]}
    assert rules == {
        f"!has(self.{n})": f"spec.podTemplate.spec.{n}: {why}" for n, why in OWNED_SPEC_FIELDS.items()
    }

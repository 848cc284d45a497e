"""Every kind of pod the supervisor makes, built by the real manifest functions (member, warm,
backup verify, delta verify, restore; official and Bitnami images; TLS on and off; auth; a pod
template with placement), is admitted by a real API server's PodSecurity admission in a
namespace that enforces the `restricted` profile, once the pod template says `runAsNonRoot:
true`; and without it, the only thing refused is root: the official image's own user, and
Bitnami's volume owner (root with CHOWN). Server-side dry runs: admission runs on them (the
pods taken out of the manifest's care below are refused the same way), nothing is stored and
no kubelet is needed.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from actors.model import (
    AuthSpec,
    ClusterRef,
    ClusterSpec,
    MemberLaunch,
    PodMetadata,
    PodSettings,
    PodTemplate,
    UserSpec,
)
from supervisor.kube import manifests as m
from supervisor.kube import snapshot_pods, warm_members
from tests.harness.kube import KubeAPIServer
from tests.kube.test_runtime import launch_for

Obj = dict[str, Any]

HELPER_IMAGE = "ghcr.io/example/etcd-supervisor:test"
NON_ROOT = {"runAsNonRoot": True}
OFFICIAL = "quay.io/coreos/etcd"
BITNAMI = "docker.io/bitnami/etcd"


def template(**security: Any) -> PodTemplate:
    return PodTemplate(
        metadata=PodMetadata(labels={"team": "storage"}),
        spec=PodSettings(
            node_selector={"kubernetes.io/os": "linux"},
            tolerations=({"key": "dedicated", "operator": "Equal", "value": "etcd", "effect": "NoSchedule"},),
            security_context=security,
        ),
    )


SPECS = {
    "official-tls": ClusterSpec(pod_template=template(**NON_ROOT)),
    "official-plain": ClusterSpec(tls_enabled=False, pod_template=template(**NON_ROOT)),
    "official-named-user": ClusterSpec(
        pod_template=template(runAsNonRoot=True, runAsUser=1000, fsGroup=2000)
    ),
    "official-auth": ClusterSpec(
        auth=AuthSpec(enabled=True, users=(UserSpec("app", client_cert_secret="app-client"),)),
        pod_template=template(**NON_ROOT),
    ),
    "bitnami-tls": ClusterSpec(repository=BITNAMI, version="3.5.21", pod_template=template(**NON_ROOT)),
    "bitnami-plain": ClusterSpec(
        repository=BITNAMI, version="3.5.21", tls_enabled=False, pod_template=template(**NON_ROOT)
    ),
}


def launch(ref: ClusterRef, spec: ClusterSpec, name: str = "demo-0") -> MemberLaunch:
    return launch_for(ref, name, m.member_urls(ref, name, tls=spec.tls_enabled), spec)


def every_pod(namespace: str, spec: ClusterSpec) -> dict[str, Obj]:
    """Each kind of pod the supervisor makes for `spec`, by name of kind."""
    ref = ClusterRef(namespace, "demo")
    owner = m.Owner(ref, "5b1f2c9e-0000-4000-8000-000000000001")
    member = m.member_pod(owner, launch(ref, spec), voter=True, trust="digest")
    recovering = m.member_pod(
        owner, attrs.evolve(launch(ref, spec, "demo-1"), force_new_cluster=True), avoid_nodes=["lost"]
    )
    return {
        "member": member,
        "recovering-member": recovering,
        "warm": warm_members.warm_pod(owner, member, helper_image=HELPER_IMAGE, token="t"),
        "verify": snapshot_pods.verify_pod(
            owner, spec, name="demo-verify-1", helper_image=HELPER_IMAGE, token="t"
        ),
        "delta-verify": snapshot_pods.verify_pod(
            owner,
            spec,
            name="demo-delta-verify-1",
            helper_image=HELPER_IMAGE,
            token="t",
            component=snapshot_pods.COMPONENT_DELTA_VERIFY,
        ),
        "restore": snapshot_pods.restore_pod(
            owner,
            launch(ref, spec),
            name="demo-restore-1",
            helper_image=HELPER_IMAGE,
            token="t",
            cluster_token="c",
        ),
    }


@pytest.fixture(scope="module")
def restricted(kube_apiserver: KubeAPIServer) -> Iterator[str]:
    """A namespace that enforces the restricted profile (its latest version)."""
    ns = kube_apiserver.create_namespace("pss-restricted")
    kube_apiserver.kubectl(
        "label",
        "namespace",
        ns,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )
    yield ns
    kube_apiserver.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def create(server: KubeAPIServer, pod: Obj) -> str:
    """'' when the API server admits `pod` (a server-side dry run), else what it said."""
    proc = server.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)
    return "" if proc.returncode == 0 else proc.stderr


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_pod_passes_restricted_when_the_template_says_run_as_non_root(
    kube_apiserver: KubeAPIServer, restricted: str, name: str
) -> None:
    pods = every_pod(restricted, SPECS[name])
    refused = {kind: said for kind, pod in pods.items() if (said := create(kube_apiserver, pod))}
    assert not refused, refused


def test_the_namespace_really_enforces_restricted(kube_apiserver: KubeAPIServer, restricted: str) -> None:
    """The test above means something only if each field the manifests set for the profile is
    needed: a pod with one taken away is refused, in the same dry run."""
    pod = every_pod(restricted, SPECS["official-tls"])["verify"]

    def without(change: Any) -> str:
        bad = copy.deepcopy(pod)
        change(bad["spec"])
        return create(kube_apiserver, bad)

    def privilege_escalation(spec: Obj) -> None:
        del spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"]

    def seccomp(spec: Obj) -> None:
        del spec["securityContext"]["seccompProfile"]

    def capabilities(spec: Obj) -> None:
        del spec["initContainers"][1]["securityContext"]["capabilities"]

    def non_root(spec: Obj) -> None:
        del spec["securityContext"]["runAsNonRoot"]

    for change, said in [
        (privilege_escalation, "allowPrivilegeEscalation != false"),
        (seccomp, "seccompProfile"),
        (capabilities, "unrestricted capabilities"),
        (non_root, "runAsNonRoot != true"),
    ]:
        refusal = without(change)
        assert "violates PodSecurity" in refusal and said in refusal, (change.__name__, refusal)


def violations(refusal: str) -> set[str]:
    """The checks a PodSecurity refusal names (`runAsNonRoot != true (...)`, ...)."""
    (detail,) = re.findall(r'violates PodSecurity "restricted:latest": (.*)', refusal)
    return {re.sub(r"\s*\(.*", "", part).strip() for part in re.split(r"\), ", detail)}


@pytest.mark.parametrize("repository", [OFFICIAL, BITNAMI])
def test_without_the_template_only_root_keeps_a_pod_out_of_restricted(
    kube_apiserver: KubeAPIServer, restricted: str, repository: str
) -> None:
    """The exception, exactly: the official image runs etcd as its own user, root; Bitnami's
    member and restore pods hand a volume that ignores fsGroup to uid 1001 as root with CHOWN.
    Nothing else of any pod is against the profile."""
    spec = ClusterSpec(repository=repository, version="3.5.21")
    for kind, pod in every_pod(restricted, spec).items():
        refusal = create(kube_apiserver, pod)
        if repository == BITNAMI and kind in ("verify", "delta-verify"):
            assert not refusal, (kind, refusal)  # the image's user, no volume to hand over
            continue
        if repository == BITNAMI:
            assert violations(refusal) == {
                "unrestricted capabilities",
                "runAsNonRoot != true",
                "runAsUser=0",
            }, (
                kind,
                refusal,
            )
            assert 'container "volume-owner" must not include "CHOWN"' in refusal, refusal
        else:
            assert violations(refusal) == {"runAsNonRoot != true"}, (kind, refusal)

"""spec.podTemplate on a real kube-apiserver, members run by the stand-in kubelet: the member pods
the API server admitted carry the template (its PriorityClass and RuntimeClass resolved by the
API server's own admission), and a change of the template remakes each member's pod once, one
at a time, never more than one member down. Warm pods carry it through adoption, and verify and
restore pods with its placement pass the API server's own validation of a Pod."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.codec import parse_spec
from actors.model import ClusterRef
from supervisor.kube import manifests as m
from supervisor.kube import snapshot_pods
from supervisor.kube import warm_members as warm
from supervisor.kube.runtime import KubeRuntime
from supervisor.kube.snapshots import open_snapshot_pod
from tests.harness.kube import KubeAPIServer
from tests.harness.kubelet import Kubelet
from tests.harness.poll import eventually
from tests.kube.clients import clients
from tests.kube.test_operator import create_cluster, healthy, operator_with_kubelet, wait_for
from tests.kube.test_runtime import create_cluster as create_bare_cluster
from tests.kube.test_runtime import launch_for
from tests.unit.test_pod_template import USER

pytestmark = pytest.mark.slow

MEMBERS = ["demo-0", "demo-1", "demo-2"]
PRIORITY = 1_000_000


def template(priority_class: str, runtime_class: str, team: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"team": team}, "annotations": {"example.com/owner": "platform"}},
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 1,
                            "preference": {
                                "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                            },
                        }
                    ]
                }
            },
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "etcd", "effect": "NoSchedule"}
            ],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                }
            ],
            "priorityClassName": priority_class,
            "imagePullSecrets": [{"name": "mirror-creds"}],
            "securityContext": {"runAsNonRoot": False, "fsGroup": 2000},
            "runtimeClassName": runtime_class,
        },
    }


def running_members(kubelet: Kubelet) -> int:
    """Members whose etcd process runs (the kubelet's Ready flag lags its 0.2 s poll: a member
    the operator already heard answer may still show not ready)."""
    return sum(1 for name in MEMBERS if (p := kubelet.pods.get(name)) is not None and p.proc.poll() is None)


async def test_members_carry_the_template_and_a_change_rolls_them_one_at_a_time(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str, tmp_path: Path
) -> None:
    ns, suffix = kube_namespace, uuid.uuid4().hex[:8]
    priority_class, runtime_class = f"etcd-{suffix}", f"runc-{suffix}"
    async with operator_with_kubelet(kube_crds, operator_kubeconfig, ns, tmp_path) as (admin, kubelet):
        classes = [
            (
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": priority_class}, "value": PRIORITY},
            ),
            ("/apis/node.k8s.io/v1/runtimeclasses", {"metadata": {"name": runtime_class}, "handler": "runc"}),
        ]
        for path, body in classes:
            kind = "PriorityClass" if "priority" in path else "RuntimeClass"
            api = "scheduling.k8s.io/v1" if "priority" in path else "node.k8s.io/v1"
            await admin.create(path, {"apiVersion": api, "kind": kind, **body})
        try:
            spec = {"size": 3, "security": {"tls": {"enabled": False}}}
            path = await create_cluster(
                admin, "demo", ns, {**spec, "podTemplate": template(priority_class, runtime_class, "storage")}
            )
            await wait_for(admin, path, healthy(3), timeout=90)
            assert sorted(kubelet.runs) == MEMBERS

            pods = (await admin.get(m.core_path(ns, "pods"), query={"labelSelector": m.MEMBER_SELECTOR}))[
                "items"
            ]
            assert sorted(p["metadata"]["name"] for p in pods) == MEMBERS
            for pod in pods:
                meta, pod_spec = pod["metadata"], pod["spec"]
                assert meta["labels"]["team"] == "storage" and meta["labels"][m.LABEL_MEMBER] == meta["name"]
                assert meta["annotations"]["example.com/owner"] == "platform"
                assert {
                    "key": "dedicated",
                    "operator": "Equal",
                    "value": "etcd",
                    "effect": "NoSchedule",
                } in pod_spec["tolerations"]
                # Resolved by the API server's admission: the class exists and its value is the pod's.
                assert pod_spec["priorityClassName"] == priority_class and pod_spec["priority"] == PRIORITY
                assert pod_spec["runtimeClassName"] == runtime_class
                assert pod_spec["imagePullSecrets"] == [{"name": "mirror-creds"}]
                assert pod_spec["securityContext"]["fsGroup"] == 2000
                affinity = pod_spec["affinity"]
                assert (
                    affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"]
                    == 1
                )
                assert affinity["podAntiAffinity"][
                    "preferredDuringSchedulingIgnoredDuringExecution"
                ]  # ours, kept
                # The user's zone constraint in place of ours: one constraint on the zone.
                (zone,) = pod_spec["topologySpreadConstraints"]
                assert zone["whenUnsatisfiable"] == "DoNotSchedule"
                assert pod_spec["containers"][0]["name"] == "etcd" and pod_spec["restartPolicy"] == "Never"

            # A change of the template: each member's pod remade once, never two members down.
            fewest = [3]

            async def watch_readiness() -> None:
                while True:
                    fewest[0] = min(fewest[0], running_members(kubelet))
                    await trio.sleep(0.05)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch_readiness)
                await admin.merge_patch(
                    path, {"spec": {"podTemplate": {"metadata": {"labels": {"team": "db"}}}}}
                )

                def teams(listing: dict[str, Any]) -> list[str]:
                    return [p["metadata"]["labels"].get("team", "") for p in listing["items"]]

                await eventually(
                    lambda: admin.get(m.core_path(ns, "pods"), query={"labelSelector": m.MEMBER_SELECTOR}),
                    lambda listing: teams(listing) == ["db"] * 3,
                    within=120,
                    what="every member pod remade with the new label",
                )
                await eventually(
                    lambda: len(kubelet.runs), lambda runs: runs >= 6, within=60, what="the pods started"
                )
                await wait_for(admin, path, healthy(3), timeout=60)
                nursery.cancel_scope.cancel()
            assert sorted(kubelet.runs) == sorted(MEMBERS * 2), kubelet.runs
            assert fewest[0] >= 2, f"{3 - fewest[0]} members were down at once during the rollout"
        finally:
            for path, body in classes:
                await admin.delete_if_exists(f"{path}/{body['metadata']['name']}")


async def test_warm_pods_keep_the_template_through_adoption_and_snapshot_pods_take_its_placement(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ns = kube_namespace
    ref = ClusterRef(ns, "early")
    # The unit tests' full template, less the classes this API server does not have.
    settings = {k: v for k, v in USER["spec"].items() if k not in ("priorityClassName", "runtimeClassName")}
    spec = parse_spec({"size": 3, "podTemplate": {**USER, "spec": settings}})
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        created = await create_bare_cluster(admin, ns, "early")
        runtime = KubeRuntime(op, helper_image="example.test/etcd-supervisor:1", poll_interval=0.1)
        seed = launch_for(ref, "early-0", await runtime.allocate_member(ref, "early-0", spec), spec)
        await runtime.start_member(seed)  # and makes early-1's warm pod
        path = m.core_path(ns, "pods", "early-1")
        made = await admin.get(path)
        assert warm.is_warm(made) and made["metadata"]["labels"]["team"] == "storage"
        assert USER["spec"]["tolerations"][0] in made["spec"]["tolerations"]  # type: ignore[index]

        learner = warm.next_launch(seed, cluster_domain=m.DEFAULT_CLUSTER_DOMAIN)
        assert learner is not None and await runtime.allocate_member(ref, "early-1", spec) == learner.urls
        async with trio.open_nursery() as nursery:
            nursery.start_soon(runtime.start_member, learner)
            adopted = await eventually(
                lambda: admin.get(path),
                lambda pod: not warm.is_warm(pod),
                within=5,
                every=0.05,
                what="adopted",
            )
            nursery.cancel_scope.cancel()
        # The same pod, now the member's: the supervisor's labels and the user's.
        assert adopted["metadata"]["uid"] == made["metadata"]["uid"]
        assert adopted["metadata"]["labels"] == {
            **m.member_labels(ref, "early-1"),
            m.LABEL_PEER_RECORD: "true",
            "team": "storage",
        }

        owner = m.Owner(ref, created["metadata"]["uid"])
        for pod in (
            snapshot_pods.verify_pod(owner, spec, name="early-verify-1", helper_image="img:1", token="t"),
            snapshot_pods.restore_pod(
                owner, seed, name="early-restore-1", helper_image="img:1", token="t", cluster_token="c"
            ),
        ):
            async with open_snapshot_pod(op, ref, pod) as name:
                stored = (await admin.get(m.core_path(ns, "pods", name)))["spec"]
            assert stored["nodeSelector"] == USER["spec"]["nodeSelector"]  # type: ignore[index]
            assert stored["affinity"] == {"nodeAffinity": USER["spec"]["affinity"]["nodeAffinity"]}  # type: ignore[index]
            assert USER["spec"]["tolerations"][0] in stored["tolerations"]  # type: ignore[index]
            assert stored["securityContext"]["runAsUser"] == 1000
            assert stored["imagePullSecrets"] == [{"name": "mirror-creds"}]

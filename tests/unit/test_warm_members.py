"""Warm member pods (supervisor/kube/warm_members.py): which member is made ahead, and that its
pod is adopted only for exactly the launch it was made for."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from actors.model import ClusterSpec, EtcdMember, MemberLaunch, ProcessState, RuntimeMember
from actors.observed import Observed
from supervisor.kube import manifests as m
from supervisor.kube import warm_members as warm
from supervisor.kube.pods import member_ref
from tests.unit.test_kube_manifests import OWNER, REF, launch

SPEC = ClusterSpec(size=3)
IMAGE = "registry.example/etcd-supervisor:1.2"


def _observed_after_adding(current: MemberLaunch, learner: MemberLaunch) -> Observed:
    """What the cluster actor sees once `learner` is added beside the members `current` started
    among (all of them running, the learner not yet)."""
    members = tuple(
        EtcdMember(i + 1, name, (url,), (), False) for i, (name, url) in enumerate(current.initial_cluster)
    )
    unnamed_learner = EtcdMember(99, "", (learner.urls.peer_url,), (), True)
    running = [
        RuntimeMember(name, m.member_urls(REF, name, tls=True), ProcessState.RUNNING, True)
        for name, _ in current.initial_cluster
    ]
    added = RuntimeMember(learner.name, learner.urls, ProcessState.ABSENT, False)
    return Observed(REF, (*running, added), (*members, unnamed_learner), {})


def test_while_the_cluster_grows_the_next_member_is_predicted_as_the_planner_will_start_it() -> None:
    seed = launch(SPEC)  # main-0, a cluster of one
    first = warm.next_launch(seed, cluster_domain="cluster.local")
    assert first is not None and first.name == "main-1" and first.initial_cluster_state == "existing"
    # The initial cluster is exactly what the learner planner will give that member ...
    assert first.initial_cluster == _observed_after_adding(seed, first).initial_cluster("main-1")
    second = warm.next_launch(first, cluster_domain="cluster.local")
    assert second is not None and second.name == "main-2"
    assert second.initial_cluster == _observed_after_adding(first, second).initial_cluster("main-2")
    # ... and nothing is made ahead once the size is reached.
    assert warm.next_launch(second, cluster_domain="cluster.local") is None


def test_an_adopted_clusters_old_members_do_not_count_towards_the_size() -> None:
    """spec.adopt: our first member joins the three old ones; the two after it are made ahead,
    joining the old members too, as the learner planner will start them."""
    old = tuple((f"old-{i}", f"http://old-{i}.old.ns.svc.cluster.local:2380") for i in range(3))
    plain = ClusterSpec(size=3, tls_enabled=False)
    first = launch(plain, "main-0", "existing")
    first = attrs.evolve(first, initial_cluster=tuple(sorted((*old, *first.initial_cluster))))
    ahead = warm.upcoming_launches(first, cluster_domain="cluster.local")
    assert [a.name for a in ahead] == ["main-1", "main-2"]
    assert ahead[0].initial_cluster == _observed_after_adding(first, ahead[0]).initial_cluster("main-1")
    assert {name for name, _ in ahead[1].initial_cluster} == {
        "old-0",
        "old-1",
        "old-2",
        "main-0",
        "main-1",
        "main-2",
    }


def test_growing_past_ordinal_nine_lists_members_in_the_planners_order() -> None:
    names = [f"main-{i}" for i in (0, 2, 9)]
    pairs = tuple(sorted((n, m.member_urls(REF, n, tls=True).peer_url) for n in names))
    nine = attrs.evolve(launch(ClusterSpec(size=5), "main-9", "existing"), initial_cluster=pairs)
    ten = warm.next_launch(nine, cluster_domain="cluster.local")
    assert ten is not None and ten.name == "main-10"
    assert ten.initial_cluster == _observed_after_adding(nine, ten).initial_cluster("main-10")


@pytest.mark.parametrize(
    "change",
    [
        {"initial_cluster": ()},  # a restart on its data: no growth to get ahead of
        {"force_new_cluster": True},  # quorum-loss recovery
    ],
)
def test_nothing_is_made_ahead_of_a_start_that_is_not_growth(change: dict[str, Any]) -> None:
    assert warm.next_launch(attrs.evolve(launch(SPEC), **change), cluster_domain="cluster.local") is None


def test_a_bitnami_warm_pod_is_its_members_pod_volume_owner_and_user_included() -> None:
    # Its etcd is the image's binary with our flags, as for the official image: it can wait
    # behind the gate too.
    bitnami = ClusterSpec(size=3, repository="bitnami/etcd", version="3.5.17")
    ahead = warm.next_launch(launch(bitnami), cluster_domain="cluster.local")
    assert ahead is not None
    pod, member = _warm_and_member(ahead)
    etcd = next(c for c in pod["spec"]["containers"] if c["name"] == "etcd")
    assert etcd["command"][-1] == "/opt/bitnami/etcd/bin/etcd"
    assert etcd["securityContext"] == member["spec"]["containers"][0]["securityContext"]
    assert etcd["env"] == [{"name": warm.TOKEN_ENV, "value": "tok"}]  # nothing etcd reads
    assert pod["spec"]["initContainers"] == member["spec"]["initContainers"]
    assert (
        pod["spec"]["securityContext"]
        == member["spec"]["securityContext"]
        == {"seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 1001}
    )


def _warm_and_member(ahead: MemberLaunch) -> tuple[dict[str, Any], dict[str, Any]]:
    member = m.member_pod(OWNER, ahead)
    return warm.warm_pod(OWNER, member, helper_image=IMAGE, token="tok"), member


def test_a_warm_pod_is_the_members_pod_behind_a_gate_and_counts_for_nothing_until_adopted() -> None:
    ahead = warm.next_launch(launch(SPEC), cluster_domain="cluster.local")
    assert ahead is not None
    pod, member = _warm_and_member(ahead)
    assert pod["metadata"]["name"] == member["metadata"]["name"] == "main-1"
    # The member's etcd, with its flags, behind the gate that the operator's image puts in place
    # first: the kubelet starts the next container only once the postStart hook has copied it.
    (first, etcd), (wanted,) = pod["spec"]["containers"], member["spec"]["containers"]
    gate = etcd["command"][: etcd["command"].index("--") + 1]
    assert etcd["command"] == [*gate, *wanted["command"]] and etcd["args"] == wanted["args"]
    assert gate[0].startswith(warm.GATE_DIR) and {"name": warm.TOKEN_ENV, "value": "tok"} in etcd["env"]
    assert first["name"] == warm.GATE_CONTAINER and first["image"] == IMAGE
    assert first["lifecycle"]["postStart"]["exec"]["command"][-1] == f"--copy-to={gate[0]}"
    assert first["command"] == ["start-gate", "--hold"] and "initContainers" not in pod["spec"]
    assert pod["metadata"]["annotations"][m.ANNOTATION_DEFAULT_CONTAINER] == "etcd"
    # Not a member for the runtime, the watches, the Services or the disruption budget ...
    assert member_ref(pod) is None
    labels = pod["metadata"]["labels"]
    assert any(labels.get(k) != v for k, v in m.member_selector(REF).items())
    # ... but published by the peer Service: its member's name resolves before it is added.
    assert m.peer_service(OWNER)["spec"]["selector"].items() <= labels.items()
    claim = warm.warm_claim(OWNER, ahead)
    assert member_ref(claim) is None and warm.is_warm(claim) and warm.is_warm(pod)
    assert m.LABEL_PEER_RECORD not in claim["metadata"]["labels"]
    # ... until the adoption patch gives it the member's labels and drops the warm one (and
    # sets the peer record, which a warm pod of an earlier operator lacks).
    patch = warm.pod_adoption_patch(REF, "main-1")["metadata"]["labels"]
    assert patch[m.LABEL_PEER_RECORD] == "true"
    assert m.LABEL_PEER_RECORD not in warm.adoption_patch(REF, "main-1")["metadata"]["labels"]
    assert member_ref({"metadata": {"namespace": REF.namespace, "labels": {**labels, **patch}}}) == (
        REF,
        "main-1",
    )
    assert patch[warm.LABEL_WARM] is None


def test_a_warm_pod_is_adopted_only_for_the_launch_it_was_made_for() -> None:
    ahead = warm.next_launch(launch(SPEC), cluster_domain="cluster.local")
    assert ahead is not None
    pod, member = _warm_and_member(ahead)
    assert warm.made_for(pod, member)
    # Another initial cluster (a member replaced meanwhile), or another spec: not this pod.
    other = attrs.evolve(ahead, initial_cluster=((ahead.name, ahead.urls.peer_url),))
    assert not warm.made_for(pod, m.member_pod(OWNER, other))
    upgraded = attrs.evolve(ahead, spec=attrs.evolve(SPEC, version="3.7.3"))
    assert not warm.made_for(pod, m.member_pod(OWNER, upgraded))


def test_the_gate_is_opened_only_while_it_listens() -> None:
    pod, _ = _warm_and_member(warm.next_launch(launch(SPEC), cluster_domain="cluster.local"))  # type: ignore[arg-type]
    assert warm.gate_of(pod) is None  # not scheduled yet
    pod["status"] = {"phase": "Pending"}
    assert warm.gate_of(pod) is None  # no address yet
    pod["status"] = {"phase": "Pending", "podIP": "10.244.0.9"}
    assert warm.gate_of(pod) == ("10.244.0.9", "tok")  # the caller connects until it listens
    pod["status"]["phase"] = "Failed"
    assert warm.gate_of(pod) is None  # given up
    # The gate gave up while the first container idles on: the pod still runs, etcd does not.
    given_up = {"name": "etcd", "state": {"terminated": {"exitCode": 1}}}
    pod["status"] = {"phase": "Running", "podIP": "10.244.0.9", "containerStatuses": [given_up]}
    assert warm.gate_of(pod) is None


def test_the_sweep_takes_failed_and_stale_warm_pods_and_claims_left_without_one() -> None:
    def obj(name: str, age: float, phase: str = "Pending", member: str = "") -> dict[str, Any]:
        labels = {warm.LABEL_WARM: member or name}
        return {"metadata": {"name": name, "labels": labels, "age": age}, "status": {"phase": phase}}

    gave_up = obj("main-6", 5, "Running")
    gave_up["status"]["containerStatuses"] = [{"name": "etcd", "state": {"terminated": {"exitCode": 1}}}]
    pods = [obj("main-1", 5), obj("main-2", 5, "Failed"), obj("main-3", warm.WARM_MAX_AGE + 1), gave_up]
    claims = [
        obj("main-1-data", 600, member="main-1"),  # its pod waits: kept however old
        obj("main-2-data", 600, member="main-2"),  # its pod failed
        obj("main-4-data", warm.CLAIM_GRACE + 1, member="main-4"),  # no pod at all
        obj("main-5-data", 1, member="main-5"),  # its pod is about to be made
    ]
    doomed_pods, doomed_claims = warm.sweep(pods, claims, age_of=lambda o: o["metadata"]["age"])
    assert doomed_pods == ["main-2", "main-3", "main-6"]
    assert doomed_claims == ["main-2-data", "main-4-data"]


def test_at_the_seed_every_member_still_to_come_is_made_ahead_up_to_a_bound() -> None:
    ahead = warm.upcoming_launches(launch(SPEC), cluster_domain="cluster.local")
    assert [a.name for a in ahead] == ["main-1", "main-2"]
    assert (
        ahead[1].initial_cluster == warm.next_launch(ahead[0], cluster_domain="cluster.local").initial_cluster
    )  # type: ignore[union-attr]
    big = warm.upcoming_launches(launch(ClusterSpec(size=9)), cluster_domain="cluster.local")
    assert len(big) == warm.AHEAD

"""Real etcd pods on a real node: three static pods (the reference), then the operator's cluster.

The static pods are what any etcd on Kubernetes must at least do, and their time from
``kubectl apply`` to all Ready is the yardstick for the operator's (issue 16: at most 1.5x).
The operator runs as a host process here (``etcd-supervisor run --kubeconfig`` with the deployed
ServiceAccount's token), resolving member names through cluster DNS like a pod would.

Where the time goes on the built-in node (kubelet --v=2 logs): a pod's volumes are waited on in
300 ms polls, its sandbox and container start in ~0.75 s, and the kubelet's status (container
running, pod IP) follows only at its next PLEG relist, up to 1 s later (containerd 1.6 has no
CRI events for the evented PLEG); then etcd needs ~0.3-0.7 s to serve. The static pods pay that
once, in parallel; the operator starts its members one after another (seed, then each learner
once the previous one serves), so it pays it three times. Its own share per step is ~0.1-0.2 s
(bench/bench_formation.py measures the ratio over alternating runs).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from supervisor.kube import manifests as m
from tests.harness import images
from tests.harness.cluster import Cluster
from tests.harness.components import require
from tests.harness.formation import (
    STATIC_NAMES,
    TIMINGS,
    assert_no_member_failed,
    form_cluster,
    import_pinned_etcd,
    is_ready,
    pods,
    time_static_pods,
    tls_files,
    wait_for,
)
from tests.harness.members_on_nodes import IN_POD_LOCAL, IN_POD_TLS, etcd_members
from tests.harness.node import ROOT
from tests.harness.watch import KubectlWatch

# --- the reference: three static etcd pods ------------------------------------------------------


def test_three_static_etcd_pods_become_ready_and_serve(e2e_cluster: Cluster, e2e_namespace: str) -> None:
    TIMINGS["static"] = time_static_pods(e2e_cluster, e2e_namespace)
    print(f"\nthree static etcd pods: apply -> all Ready in {TIMINGS['static']:.2f}s")

    ns = ["-n", e2e_namespace]
    e2e_cluster.kubectl("exec", *ns, "static-0", "--", "etcdctl", "put", "greeting", "hello")
    got = e2e_cluster.kubectl(
        "exec", *ns, "static-2", "--", "etcdctl", "get", "--print-value-only", "greeting"
    )
    assert got.stdout.strip() == "hello"
    members = e2e_cluster.kubectl("exec", *ns, "static-1", "--", "etcdctl", "member", "list").stdout
    assert sorted(line.split(", ")[2] for line in members.splitlines()) == STATIC_NAMES


# --- the operator, as a host process --------------------------------------------------------------


def test_operator_forms_a_tls_cluster_of_real_pods(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path, tmp_path: Path
) -> None:
    seconds, seen = form_cluster(e2e_cluster, e2e_namespace, "demo", tls=True)
    TIMINGS["operator-tls"] = seconds
    ratio = f" = {seconds / TIMINGS['static']:.2f}x the static pods" if "static" in TIMINGS else ""
    print(f"\nEtcdCluster (3 members, TLS): apply -> Running in {seconds:.2f}s{ratio}")
    # The peer-SAN fix: no learner's first peer connection refused, so no pod crashed.
    assert_no_member_failed(seen)
    # Each learner ran in the pod made for it ahead of time: the gate's container beside etcd,
    # which the gate became once opened (one container start, no exit). One exception, not
    # ours: the node authorizer had not yet seen the warm pod bound when the kubelet first
    # asked for its claim, and the kubelet retries only ~10 s later, after the operator gave
    # up waiting for that pod (warm_members.WARM_SETUP) and made the member a fresh one.
    for p in pods(e2e_cluster, e2e_namespace, f"{m.LABEL_INSTANCE}=demo"):
        name = p["metadata"]["name"]
        started = {c["name"]: (list(c["state"]), c["restartCount"]) for c in p["status"]["containerStatuses"]}
        warm = {} if name == "demo-0" else {"start-gate": (["running"], 0)}
        if started != {"etcd": (["running"], 0), **warm}:
            refused = authorizer_refusals(e2e_cluster, e2e_namespace, name)
            assert warm and refused and started == {"etcd": (["running"], 0)}, (name, started)

    ref = m.ClusterRef(e2e_namespace, "demo")
    ns = ["-n", e2e_namespace]
    # Member names resolve, through cluster DNS, to the pods' own addresses.
    for p in pods(e2e_cluster, e2e_namespace, f"{m.LABEL_INSTANCE}=demo"):
        host = m.member_host(ref, p["metadata"]["name"])
        out = subprocess.run(
            e2e_cluster.host_dns_command(["getent", "hosts", host]),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert out.split()[0] == p["status"]["podIP"], (host, out)

    # put through the client Service (a ClusterIP) from this host, get back from inside a pod.
    etcdctl = images.default_etcd_dir() / "etcdctl"
    client = f"https://{m.client_service_hosts(ref)[-1]}:{m.CLIENT_PORT}"
    put = e2e_cluster.host_dns_command(
        [
            etcdctl,
            f"--endpoints={client}",
            *tls_files(e2e_cluster, e2e_namespace, "demo", tmp_path),
            "put",
            "greeting",
            "hello",
        ]
    )
    # Running says the members serve; the Service routes once the kubelet has reported them
    # Ready and kube-proxy has caught up (a second or two, more on a loaded machine).
    wait_for(
        "a put through the client Service",
        lambda: subprocess.run(put, capture_output=True, text=True, timeout=30).returncode == 0,
        60,
        poll=0.5,
    )
    in_pod = [f"--endpoints=https://{m.client_service_hosts(ref)[2]}:{m.CLIENT_PORT}", *IN_POD_TLS]
    got = e2e_cluster.kubectl(
        "exec", *ns, "demo-2", "--", "etcdctl", *in_pod, "get", "--print-value-only", "greeting"
    )
    assert got.stdout.strip() == "hello"
    members = json.loads(
        e2e_cluster.kubectl(
            "exec", *ns, "demo-0", "--", "etcdctl", *in_pod, "member", "list", "-w", "json"
        ).stdout
    )["members"]
    assert len(members) == 3 and not any(mem.get("isLearner") for mem in members)

    # Metrics: each member pod serves etcd's own on its metrics port (plain HTTP, TLS or not),
    # and the operator's /metrics describes the cluster.
    for p in pods(e2e_cluster, e2e_namespace, f"{m.LABEL_INSTANCE}=demo"):
        scraped = http_text(f"http://{p['status']['podIP']}:{m.METRICS_PORT}/metrics")
        assert "etcd_server_has_leader 1" in scraped, p["metadata"]["name"]
    port = int(operator.with_suffix(".port").read_text())
    labels = f'{{cluster="demo",namespace="{e2e_namespace}"}}'
    wait_for(
        "the operator's /metrics showing 3 healthy voters",
        lambda: (
            f"etcd_supervisor_cluster_healthy_voting_members{labels} 3.0"
            in http_text(f"http://127.0.0.1:{port}/metrics")
        ),
        30,
    )


def authorizer_refusals(cluster: Cluster, namespace: str, pod: str) -> list[str]:
    """The kubelet's FailedMount Events on `pod` that the node authorizer's race explains."""
    events = cluster.get_json("events", namespace=namespace)["items"]
    return [
        e["message"]
        for e in events
        if e.get("reason") == "FailedMount"
        and e.get("involvedObject", {}).get("name") == pod
        and "no relationship found" in e.get("message", "")
    ]


def http_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())


def test_operator_forms_a_plain_cluster_without_waiting_out_probes(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path
) -> None:
    """Each learner used to wait ~11 s for its first readiness probe (37 s for 3 members)."""
    seconds, seen = form_cluster(e2e_cluster, e2e_namespace, "plain", tls=False)
    TIMINGS["operator-plain"] = seconds
    print(f"\nEtcdCluster (3 members, no TLS): apply -> Running in {seconds:.2f}s")
    assert_no_member_failed(seen)
    assert seconds < 20, f"{seconds:.1f}s: members still wait on slow readiness probes?"


def test_deleted_member_pod_comes_back_on_its_own_volume(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path
) -> None:
    _, seen = form_cluster(e2e_cluster, e2e_namespace, "heal", tls=True)
    assert_no_member_failed(seen)
    ns = ["-n", e2e_namespace]
    local = IN_POD_LOCAL
    e2e_cluster.kubectl("exec", *ns, "heal-0", "--", "etcdctl", *local, "put", "kept", "yes")
    old = e2e_cluster.get_json("pod", "heal-1", namespace=e2e_namespace)

    start = time.monotonic()
    e2e_cluster.kubectl("delete", "pod", *ns, "heal-1", "--wait=false")

    def replaced() -> bool:
        pod = e2e_cluster.kubectl("get", "pod", *ns, "heal-1", "-o", "json", check=False)
        if pod.returncode:
            return False
        new = json.loads(pod.stdout)
        status = e2e_cluster.get_json("etcdcluster", "heal", namespace=e2e_namespace).get("status") or {}
        return (
            new["metadata"]["uid"] != old["metadata"]["uid"]
            and is_ready(new)
            and status.get("phase") == "Running"
        )

    wait_for("heal-1 replaced and the cluster Running", replaced, 120)
    print(f"\nmember pod deleted -> replaced, cluster Running in {time.monotonic() - start:.2f}s")
    # Same claim, so the member kept its identity: still 3 voting members, none added.
    new = e2e_cluster.get_json("pod", "heal-1", namespace=e2e_namespace)
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for v in new["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert claims == [m.volume_claim_name("heal-1")]
    members = json.loads(
        e2e_cluster.kubectl(
            "exec", *ns, "heal-1", "--", "etcdctl", *local, "member", "list", "-w", "json"
        ).stdout
    )["members"]
    assert sorted(mem["name"] for mem in members) == ["heal-0", "heal-1", "heal-2"]
    got = e2e_cluster.kubectl(
        "exec", *ns, "heal-1", "--", "etcdctl", *local, "get", "--consistency=s", "--print-value-only", "kept"
    )
    assert got.stdout.strip() == "yes"


@pytest.mark.parametrize("minor", ["3.4", "3.7"])
def test_operator_forms_a_tls_cluster_on_other_etcd_versions(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path, minor: str
) -> None:
    """Each minor's own flag for the peer-SAN setting (3.6 renamed it, 3.7 knows only the new
    name), on real pods; the default version (3.6) forms every other cluster here."""
    if e2e_cluster.node is None:  # an external cluster (E2E_KUBECONFIG): no component is missing
        pytest.skip("other etcd versions are imported on the built-in node only")
    # `make setup` builds them (`make etcd-versions`); without one a skip, or a failure under CI.
    bin_dir = require(f"etcd {minor}", partial(images.built_etcd, minor))
    archive, version = images.etcd_archive(ROOT / "images", bin_dir)
    e2e_cluster.node.import_image(archive)
    seconds, seen = form_cluster(
        e2e_cluster, e2e_namespace, "v" + minor.replace(".", ""), tls=True, version=version
    )
    print(f"\nEtcdCluster (3 members, TLS, etcd {version}): apply -> Running in {seconds:.2f}s")
    assert_no_member_failed(seen)


def voting_members(cluster: Cluster, namespace: str, pod: str) -> list[str]:
    members = etcd_members(cluster, namespace, pod)
    return sorted(mem.get("name", "") for mem in members or [] if not mem.get("isLearner"))


def test_scale_up_and_down_and_the_disruption_budget(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path
) -> None:
    _, seen = form_cluster(e2e_cluster, e2e_namespace, "sc", tls=True)
    assert_no_member_failed(seen)
    ns = ["-n", e2e_namespace]
    selector = f"{m.LABEL_INSTANCE}=sc,{m.LABEL_COMPONENT}={m.COMPONENT_MEMBER}"

    def settled(size: int) -> bool:
        status = e2e_cluster.get_json("etcdcluster", "sc", namespace=e2e_namespace).get("status") or {}
        live = [
            p
            for p in pods(e2e_cluster, e2e_namespace, selector)
            if not p["metadata"].get("deletionTimestamp")
        ]
        return (
            status.get("phase") == "Running"
            and len(live) == size
            and all(map(is_ready, live))
            and voting_members(e2e_cluster, e2e_namespace, "sc-0") == [f"sc-{i}" for i in range(size)]
        )

    for size in (5, 3):
        start = time.monotonic()
        e2e_cluster.kubectl("scale", *ns, "etcdcluster/sc", f"--replicas={size}")
        wait_for(f"sc at {size} voting members", lambda size=size: settled(size), 120, poll=0.5)
        print(f"\nkubectl scale -> {size}: settled in {time.monotonic() - start:.2f}s")

    # The PodDisruptionBudget lets one member go, and refuses a second while it is away.
    def evict(pod: str) -> subprocess.CompletedProcess[str]:
        body = json.dumps(
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": pod, "namespace": e2e_namespace},
            }
        )
        path = f"/api/v1/namespaces/{e2e_namespace}/pods/{pod}/eviction"
        return e2e_cluster.kubectl("create", "--raw", path, "-f", "-", input=body, check=False)

    def budget() -> dict[str, Any]:
        return dict(
            e2e_cluster.get_json(
                "pdb", m.disruption_budget_name(m.ClusterRef(e2e_namespace, "sc")), namespace=e2e_namespace
            ).get("status")
            or {}
        )

    # The budget's controller catches up with the scale-down first.
    wait_for(
        f"the budget to allow one disruption ({budget()})",
        lambda: budget().get("disruptionsAllowed") == 1,
        60,
    )
    assert evict("sc-2").returncode == 0
    second = evict("sc-1")
    assert second.returncode != 0 and "disruption budget" in second.stderr, second.stderr


def test_a_member_whose_volume_is_deleted_is_replaced_by_a_new_member(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path
) -> None:
    """Its claim and pod deleted, a member's data is gone: the operator removes it from etcd and a
    new member (a new name, a new claim) joins as a learner; the data written before is kept."""
    _, seen = form_cluster(e2e_cluster, e2e_namespace, "lose", tls=True)
    assert_no_member_failed(seen)
    ns = ["-n", e2e_namespace]
    local = IN_POD_LOCAL
    e2e_cluster.kubectl("exec", *ns, "lose-0", "--", "etcdctl", *local, "put", "kept", "yes")

    start = time.monotonic()
    e2e_cluster.kubectl("delete", "pvc", *ns, m.volume_claim_name("lose-1"), "--wait=false")
    e2e_cluster.kubectl("delete", "pod", *ns, "lose-1", "--wait=false")

    def replaced() -> bool:
        status = e2e_cluster.get_json("etcdcluster", "lose", namespace=e2e_namespace).get("status") or {}
        names = {mem["name"] for mem in status.get("members", [])}
        return status.get("phase") == "Running" and len(names) == 3 and "lose-1" not in names

    wait_for("lose-1 replaced by a new member and the cluster Running", replaced, 180)
    print(f"\nmember volume deleted -> new member, cluster Running in {time.monotonic() - start:.2f}s")
    status = e2e_cluster.get_json("etcdcluster", "lose", namespace=e2e_namespace)["status"]
    newcomer = next(mem["name"] for mem in status["members"] if mem["name"] not in ("lose-0", "lose-2"))
    got = e2e_cluster.kubectl(
        "exec", *ns, newcomer, "--", "etcdctl", *local, "get", "--consistency=s", "--print-value-only", "kept"
    )
    assert got.stdout.strip() == "yes"


# One line per pod event: name, image, phase, and whether it is being deleted.
IMAGE_LINE = (
    "{.metadata.name} {.spec.containers[0].image} {.status.phase} {.metadata.deletionTimestamp}{'\\n'}"
)


@pytest.mark.parametrize(("old_minor", "new_minor"), [("3.5", "3.6"), ("3.6", "3.7")])
def test_a_new_version_replaces_member_pods_one_at_a_time_followers_first(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path, old_minor: str, new_minor: str
) -> None:
    """spec.version to the next minor: each member's pod is recreated on its claim with the new
    image, the next only once the previous one runs, the leader last (after leadership moved).
    3.7 -> 3.6 (etcd's downgrade API) is test_version_skew's, under a checked workload."""
    if e2e_cluster.node is None:  # an external cluster (E2E_KUBECONFIG): no component is missing
        pytest.skip("other etcd versions are imported on the built-in node only")
    old, new = (import_pinned_etcd(e2e_cluster, minor) for minor in (old_minor, new_minor))
    _, seen = form_cluster(e2e_cluster, e2e_namespace, "up", tls=False, version=old)
    assert_no_member_failed(seen)
    ns = ["-n", e2e_namespace]

    def status() -> dict[str, Any]:
        return dict(e2e_cluster.get_json("etcdcluster", "up", namespace=e2e_namespace).get("status") or {})

    wait_for("members report their version", lambda: all(x.get("version") for x in status()["members"]), 30)
    leader = next(x["name"] for x in status()["members"] if x["role"] == "leader")
    selector = f"{m.LABEL_INSTANCE}=up,{m.LABEL_COMPONENT}={m.COMPONENT_MEMBER}"
    with KubectlWatch(e2e_cluster.kubeconfig, ["pods", *ns, "-l", selector], IMAGE_LINE) as watch:
        start = time.monotonic()
        e2e_cluster.kubectl(
            "patch", *ns, "etcdcluster/up", "--type=merge", "-p", json.dumps({"spec": {"version": new}})
        )

        def upgraded() -> bool:
            s = status()
            members = s.get("members") or []
            return (
                s.get("phase") == "Running"
                and s.get("readyReplicas") == 3
                and len(members) == 3
                and all(x.get("version") == new and x.get("healthy") for x in members)
            )

        wait_for(f"every member on {new}", upgraded, 300, poll=0.5)
        print(f"\nrolling upgrade {old} -> {new} on real pods: {time.monotonic() - start:.2f}s")
        # etcd raises the cluster version (status.version, from its /version) once it sees
        # every member on the new minor: seconds later.
        minor = new.rsplit(".", 1)[0] + ".0"
        wait_for(f"cluster version {minor}", lambda: status().get("version") == minor, 30, poll=0.5)
        lines = [line.split() for line in watch.drain()]
    new_image = f"{images.ETCD_REPOSITORY}:v{new}"
    # The order in which members' pods first ran the new image, and what ran meanwhile.
    order: list[str] = []
    for name, image, *rest in lines:
        if image == new_image and rest[:1] == ["Running"] and name not in order:
            order.append(name)
    assert sorted(order) == ["up-0", "up-1", "up-2"] and order[-1] == leader, order
    # One at a time: no member's old pod is deleted before the previous member runs the new image.
    for before, after in itertools.pairwise(order):
        ran = next(
            i
            for i, (n, img, *r) in enumerate(lines)
            if n == before and img == new_image and r[:1] == ["Running"]
        )
        deleted = next(
            i for i, (n, img, *r) in enumerate(lines) if n == after and img != new_image and len(r) > 1
        )
        assert ran < deleted, f"{after} went down before {before} ran {new}: {lines}"
    reasons = [
        (e["reason"], e["message"])
        for e in sorted(
            e2e_cluster.get_json("events", namespace=e2e_namespace)["items"],
            key=lambda e: e["metadata"]["creationTimestamp"],
        )
        if e["involvedObject"]["kind"] == "EtcdCluster"
    ]
    assert any(r == "LeaderMoved" for r, _ in reasons), reasons
    # Once; twice only if an election put leadership on a member not yet restarted.
    assert [r for r, _ in reasons].count("LeaderMoved") <= 2, reasons

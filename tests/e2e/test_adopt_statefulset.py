"""spec.adopt on real pods: a plain etcd run the way charts run it (a 3-replica StatefulSet behind
a headless Service, members named and reached by their DNS names) is taken over live by an
EtcdCluster under a recorded client workload. The new members join as learners and vote, the
old members then leave the membership one at a time, and every key keeps its value and
revision; the clients' history across it all is linearizable (porcupine). Afterwards the
EtcdCluster is like any other: it heals a deleted member pod, scales 3 -> 4 -> 3, and takes a
verified on-demand backup.

The operator runs on this host (the `operator` fixture), resolving names through cluster DNS but
without a pod's search path: spec.adopt.endpoints are written short (`http://old-0.old:2379`),
which it must resolve as a pod in the cluster's namespace would. This test process reaches every
member by its pod IP. A second, shorter test has the operator deployed as a pod of its own
namespace, where those short names mean nothing to its resolver, adopt the same way.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from supervisor.kube import manifests as m
from tests.e2e.test_operator_pod import deployed_operator  # noqa: F401 (a fixture)
from tests.harness import images
from tests.harness.cluster import Cluster
from tests.harness.components import require
from tests.harness.formation import etcd_cluster, is_ready, pods, wait_for
from tests.harness.history import KvWorkload, check_history, checker_or_skip
from tests.harness.members_on_nodes import background, member_selector
from tests.harness.objstore import S3Server, moto_server_binary, open_moto_server
from tests.harness.watch import KubectlWatch

OLD = "old"  # the StatefulSet and its headless Service, as a chart names them
OLD_NAMES = [f"{OLD}-{i}" for i in range(3)]
NAME = "adopter"  # the EtcdCluster
BUCKET = "adopted-backups"
KEYS = 200


def old_host(namespace: str, pod: str) -> str:
    return f"{pod}.{OLD}.{namespace}.svc.{m.DEFAULT_CLUSTER_DOMAIN}"


def old_etcd(namespace: str, version: str) -> list[dict[str, Any]]:
    """The chart shape of a plain etcd: a headless Service that publishes the pods before they
    are Ready (peers must find each other to become Ready), and a StatefulSet whose pods start
    together and name each other by DNS."""
    host = f"$(POD_NAME).{OLD}.{namespace}.svc.{m.DEFAULT_CLUSTER_DOMAIN}"
    initial = ",".join(f"{n}=http://{old_host(namespace, n)}:2380" for n in OLD_NAMES)
    labels = {"app": OLD}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": OLD, "namespace": namespace},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": labels,
            "ports": [{"name": "client", "port": 2379}, {"name": "peer", "port": 2380}],
        },
    }
    container = {
        "name": "etcd",
        "image": f"{images.ETCD_REPOSITORY}:v{version}",
        "command": ["/usr/local/bin/etcd"],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "args": [
            "--name=$(POD_NAME)",
            "--data-dir=/var/lib/etcd/data",
            "--listen-peer-urls=http://0.0.0.0:2380",
            "--listen-client-urls=http://0.0.0.0:2379",
            "--listen-metrics-urls=http://0.0.0.0:2381",
            f"--advertise-client-urls=http://{host}:2379",
            f"--initial-advertise-peer-urls=http://{host}:2380",
            f"--initial-cluster={initial}",
            "--initial-cluster-state=new",
            f"--initial-cluster-token={OLD}",
        ],
        "readinessProbe": {
            "httpGet": {"path": "/health?serializable=true", "port": 2381},
            "periodSeconds": 1,
            "failureThreshold": 3,
        },
        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
    }
    stateful_set = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": OLD, "namespace": namespace},
        "spec": {
            "serviceName": OLD,
            "replicas": 3,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container], "volumes": [{"name": "data", "emptyDir": {}}]},
            },
        },
    }
    return [service, stateful_set]


def ready_ips(cluster: Cluster, namespace: str, selector: str) -> dict[str, str]:
    """Pod name -> pod IP of the Ready pods not being deleted."""
    return {
        p["metadata"]["name"]: p["status"]["podIP"]
        for p in pods(cluster, namespace, selector)
        if is_ready(p) and p["status"].get("podIP") and not p["metadata"].get("deletionTimestamp")
    }


def client_urls(ips: dict[str, str]) -> list[str]:
    return [f"http://{ip}:{m.CLIENT_PORT}" for _, ip in sorted(ips.items())]


def etcdctl(
    endpoints: list[str], *args: str, check: bool = True, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """etcdctl on this host against `endpoints` (pod IPs: the host resolves no cluster name)."""
    cmd = [str(images.default_etcd_dir() / "etcdctl"), f"--endpoints={','.join(endpoints)}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=check, input=input)


def member_names(endpoints: list[str]) -> list[str] | None:
    """The names in etcd's member list (learners named too); None if no endpoint answers."""
    done = etcdctl(endpoints, "--command-timeout=5s", "member", "list", "-w", "json", check=False)
    if done.returncode:
        return None
    return sorted(mem.get("name", "") for mem in json.loads(done.stdout).get("members") or [])


def voter_names(endpoints: list[str]) -> list[str]:
    done = etcdctl(endpoints, "--command-timeout=5s", "member", "list", "-w", "json", check=False)
    if done.returncode:
        return []
    members = json.loads(done.stdout).get("members") or []
    return sorted(mem.get("name", "") for mem in members if not mem.get("isLearner"))


def contents(endpoints: list[str]) -> dict[str, tuple[str, int]]:
    """Every key under data/ with its value and the revision it was last written at."""
    out = json.loads(etcdctl(endpoints, "get", "data/", "--prefix", "-w", "json").stdout)
    decode = lambda b: base64.b64decode(b).decode()  # noqa: E731
    return {decode(kv["key"]): (decode(kv["value"]), int(kv["mod_revision"])) for kv in out.get("kvs") or []}


def status(cluster: Cluster, namespace: str) -> dict[str, Any]:
    return cluster.get_json("etcdcluster", NAME, namespace=namespace).get("status") or {}


@pytest.fixture
def s3(tmp_path: Path) -> Iterator[S3Server]:
    """moto on loopback: the operator runs on this host, and verifies backups in pods to which
    it pushes the snapshot itself, so no pod needs to reach the store."""
    require("moto_server", moto_server_binary)
    with open_moto_server(tmp_path) as server:
        server.create_bucket(BUCKET)
        yield server


class Phases:
    """Each phase's duration, printed as it ends."""

    def __init__(self) -> None:
        self.began = self.last = time.monotonic()

    def done(self, what: str) -> None:
        now = time.monotonic()
        print(f"  {what}: {now - self.last:.1f}s (total {now - self.began:.1f}s)")
        self.last = now


def ours(size: int = 3) -> list[str]:
    return [f"{NAME}-{i}" for i in range(size)]


def form_old_cluster(cluster: Cluster, ns: str) -> dict[str, tuple[str, int]]:
    """The old StatefulSet, serving; KEYS keys written to it. Returns what it holds."""
    cluster.apply(old_etcd(ns, cluster.etcd_version), namespace=ns)

    def formed() -> bool:
        ready = ready_ips(cluster, ns, f"app={OLD}")
        return len(ready) == 3 and member_names(client_urls(ready)) == OLD_NAMES

    wait_for("the old StatefulSet's 3 pods Ready and one cluster", formed, 120, poll=0.5)
    old_urls = client_urls(ready_ips(cluster, ns, f"app={OLD}"))
    # Ten keys a transaction: twenty revisions, each key's mod_revision one of them.
    for n in range(0, KEYS, 10):
        puts = "".join(f"put data/{k:05d} value-{k}\n" for k in range(n, n + 10))
        etcdctl(old_urls, "txn", input=f"\n{puts}\n\n")
    written = contents(old_urls)
    assert len(written) == KEYS
    return written


def adopting_cluster(cluster: Cluster, ns: str, s3: S3Server | None = None) -> dict[str, Any]:
    """The EtcdCluster that takes the old one over (with `s3`, a backup store for later)."""
    adopter = etcd_cluster(NAME, cluster.etcd_version, tls=False)
    adopter["spec"]["adopt"] = {
        # Short, as the old cluster's clients in this namespace write them: the operator, in
        # its own namespace or on this host, resolves them as a pod of this namespace would
        # (supervisor/kube/pod_names.py).
        "endpoints": [f"http://{n}.{OLD}:{m.CLIENT_PORT}" for n in OLD_NAMES],
        "removeOld": True,
    }
    if s3 is None:
        return adopter
    cluster.kubectl(
        "create", "secret", "generic", "s3-creds", "-n", ns,
        f"--from-literal=AWS_ACCESS_KEY_ID={s3.access_key_id}",
        f"--from-literal=AWS_SECRET_ACCESS_KEY={s3.secret_access_key}",
    )  # fmt: skip
    s3_store = {
        "bucket": BUCKET,
        "endpoint": s3.endpoint,
        "region": "us-east-1",
        "credentialsSecret": "s3-creds",
    }
    adopter["spec"]["backup"] = {"store": {"s3": s3_store}}
    return adopter


def adopt_under_workload(
    cluster: Cluster, ns: str, adopter: dict[str, Any], phases: Phases
) -> tuple[KvWorkload, list[str]]:
    """Apply `adopter` while clients work on the old members, following the membership, until
    only the new members are left and answer. Returns the workload and the phases shown."""
    new_selector = member_selector(NAME)
    workload = KvWorkload(
        endpoints=client_urls(ready_ips(cluster, ns, f"app={OLD}")), max_operations=20_000, pause=0.05
    )

    def follow() -> list[str]:
        """Point the workload at every member that serves now, old and new; the new ones' URLs."""
        new = client_urls(ready_ips(cluster, ns, new_selector))
        urls = client_urls(ready_ips(cluster, ns, f"app={OLD}")) + new
        if urls:
            workload.endpoints[:] = urls
        return new

    def new_vote() -> bool:
        new = follow()
        return bool(new) and [n for n in voter_names(new) if n.startswith(f"{NAME}-")] == ours()

    def old_gone() -> bool:
        new = follow()
        return bool(new) and member_names(new) == ours()

    phase_args = ["etcdclusters", "-n", ns, f"--field-selector=metadata.name={NAME}"]
    with (
        background(workload),
        KubectlWatch(cluster.kubeconfig, phase_args, "{.status.phase}{'\\n'}") as seen,
    ):
        wait_for("the workload answering", lambda: workload.acknowledged >= 50, 60)
        cluster.apply([adopter], namespace=ns)
        wait_for("the three new members voting", new_vote, 180, poll=1.0)
        phases.done("new members joined and vote")
        wait_for("the old members out of the membership", old_gone, 180, poll=1.0)
        shown = [p for p in seen.drain() if p]
        workload.endpoints[:] = follow()
        done = workload.acknowledged
        wait_for("the workload answering on the new members", lambda: workload.acknowledged >= done + 50, 60)
        phases.done("old members removed")
    return workload, shown


def settled(cluster: Cluster, ns: str, size: int) -> bool:
    """Running, with exactly `size` Ready member pods, all of them voters and nothing else."""
    live = ready_ips(cluster, ns, member_selector(NAME))
    urls = client_urls(live)
    return (
        status(cluster, ns).get("phase") == "Running"
        and sorted(live) == ours(size)
        and voter_names(urls) == ours(size)
        and member_names(urls) == ours(size)
    )


def heal_and_scale(cluster: Cluster, ns: str, phases: Phases) -> None:
    old_pod = cluster.get_json("pod", f"{NAME}-1", namespace=ns)["metadata"]["uid"]
    cluster.kubectl("delete", "pod", "-n", ns, f"{NAME}-1", "--wait=false")

    def healed() -> bool:
        uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(cluster, ns, member_selector(NAME))}
        return uids.get(f"{NAME}-1") not in (None, old_pod) and settled(cluster, ns, 3)

    wait_for("the deleted member pod back, 3 healthy voters", healed, 120, poll=1.0)
    phases.done("deleted member pod healed")

    for size in (4, 3):
        cluster.kubectl("scale", "-n", ns, f"etcdcluster/{NAME}", f"--replicas={size}")
        wait_for(
            f"{NAME} at {size} voting members", lambda size=size: settled(cluster, ns, size), 120, poll=1.0
        )
        phases.done(f"scaled to {size}")

    # The disruption budget is the one of any 3-member cluster: one member may go.
    budget = m.disruption_budget_name(m.ClusterRef(ns, NAME))

    def allows_one() -> bool:
        found = cluster.get_json("pdb", budget, namespace=ns).get("status") or {}
        return bool(found.get("disruptionsAllowed") == 1)

    wait_for("the disruption budget allowing one disruption", allows_one, 60)


def back_up(cluster: Cluster, ns: str) -> dict[str, Any]:
    """An on-demand EtcdBackup, until it Succeeded; its status."""
    request = {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdBackup",
        "metadata": {"name": "after-adoption"},
        "spec": {"clusterName": NAME},
    }
    cluster.apply([request], namespace=ns)

    def backed_up() -> dict[str, Any] | None:
        found = cluster.get_json("etcdbackup", "after-adoption", namespace=ns).get("status") or {}
        assert found.get("phase") != "Failed", found
        return found if found.get("phase") == "Succeeded" else None

    return dict(wait_for("the on-demand backup Succeeded", backed_up, 120, poll=0.5))


def removed_events(cluster: Cluster, ns: str) -> list[str]:
    events = cluster.get_json("events", "--field-selector", f"involvedObject.name={NAME}", namespace=ns)
    return [e["message"] for e in events["items"] if e["reason"] == "MemberRemoved"]


def test_a_statefulset_of_plain_etcd_is_adopted_live_then_heals_scales_and_backs_up(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path, s3: S3Server, tmp_path: Path
) -> None:
    checker_or_skip()
    ns, phases = e2e_namespace, Phases()
    print()
    before = form_old_cluster(e2e_cluster, ns)
    phases.done("old StatefulSet formed, keys written")

    workload, shown = adopt_under_workload(e2e_cluster, ns, adopting_cluster(e2e_cluster, ns, s3), phases)
    verdict = check_history(workload.history, tmp_path / "history")
    print(f"  linearizability: {verdict.operations} operations checked")
    assert verdict.ok, verdict.report
    assert workload.history.count(kind="put", outcome="ok") > 0
    new_urls = client_urls(ready_ips(e2e_cluster, ns, member_selector(NAME)))
    after = contents(new_urls)
    assert after == before  # every key, its value and its revision: the old cluster's data, no restore
    # Until the old members left, the cluster was not at its size (the three old voters are not
    # spec.size): Scaling, never Running before.
    scaling = [i for i, p in enumerate(shown) if p == "Scaling"]
    assert scaling and "Running" not in shown[: scaling[-1]], shown
    wait_for("the EtcdCluster Running", lambda: status(e2e_cluster, ns).get("phase") == "Running", 60)
    assert sorted(mem["name"] for mem in status(e2e_cluster, ns)["members"]) == ours()
    removed = removed_events(e2e_cluster, ns)
    assert len(removed) == 3 and all("adopted" in msg for msg in removed), removed
    phases.done("data and history checked")

    # Then an EtcdCluster like any other.
    heal_and_scale(e2e_cluster, ns, phases)
    taken = back_up(e2e_cluster, ns)
    assert taken["verified"] is True and taken["revision"] >= max(rev for _, rev in before.values())
    phases.done("on-demand backup verified")
    assert contents(client_urls(ready_ips(e2e_cluster, ns, member_selector(NAME)))) == after


def test_the_deployed_operator_adopts_by_names_short_in_the_clusters_namespace(
    e2e_cluster: Cluster,
    e2e_namespace: str,
    deployed_operator: None,  # noqa: F811
) -> None:
    """The operator as a pod of its own namespace, where `old-0.old` names nothing (its
    resolver's search path is its namespace's): it adopts all the same."""
    ns, phases = e2e_namespace, Phases()
    print()
    before = form_old_cluster(e2e_cluster, ns)
    phases.done("old StatefulSet formed, keys written")
    e2e_cluster.apply([adopting_cluster(e2e_cluster, ns)], namespace=ns)
    wait_for("only the new members, all voting", lambda: settled(e2e_cluster, ns, 3), 180, poll=1.0)
    phases.done("adopted, the old members removed")
    assert contents(client_urls(ready_ips(e2e_cluster, ns, member_selector(NAME)))) == before

"""spec.adopt on real pods: a plain etcd run the way charts run it (a 3-replica StatefulSet behind
a headless Service, members named and reached by their DNS names) is taken over live by an
EtcdCluster under a recorded client workload. The new members join as learners and vote, the
old members then leave the membership one at a time, and every key keeps its value and
revision; the clients' history across it all is linearizable (porcupine). Afterwards the
EtcdCluster is like any other: it heals a deleted member pod, scales 3 -> 4 -> 3, and takes a
verified on-demand backup. The same StatefulSet run over TLS (clients and peers, one CA, the
certificates in a Secret its pods mount) is adopted the same way, with its CA, which signs the
new members' certificates (checked on their peer listeners).

The operator runs on this host (the `operator` fixture), resolving names through cluster DNS but
without a pod's search path: spec.adopt.endpoints are written short (`http://old-0.old:2379`),
which it must resolve as a pod in the cluster's namespace would. This test process reaches every
member by its pod IP. A second, shorter test has the operator deployed as a pod of its own
namespace, where those short names mean nothing to its resolver, adopt the same way.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from cryptography import x509

from supervisor import pki
from supervisor.etcd.tls import TlsFiles as ClientTls
from supervisor.kube import manifests as m
from tests.e2e.test_operator_pod import deployed_operator  # noqa: F401 (a fixture)
from tests.harness import images
from tests.harness.adoption import CLIENT_SECRET, PEER_CA_SECRET, adoption_secrets, secret_manifest
from tests.harness.cluster import Cluster
from tests.harness.components import require
from tests.harness.etcd import TlsFiles as OldTls
from tests.harness.etcd import generate_tls
from tests.harness.formation import etcd_cluster, is_ready, pods, wait_for
from tests.harness.history import KvWorkload, check_history, checker_or_skip
from tests.harness.members_on_nodes import background, member_selector
from tests.harness.objstore import S3Server, moto_server_binary, open_moto_server
from tests.harness.served_cert import served_certificate
from tests.harness.watch import KubectlWatch

OLD = "old"  # the StatefulSet and its headless Service, as a chart names them
OLD_NAMES = [f"{OLD}-{i}" for i in range(3)]
NAME = "adopter"  # the EtcdCluster
BUCKET = "adopted-backups"
KEYS = 200
OLD_TLS_SECRET = "old-tls"  # the old members' CA, certificate and key, as their pods mount them
OLD_TLS_DIR = "/etc/etcd/old-tls"


@attrs.frozen
class Reach:
    """How this test process reaches members, by pod IP: over plain HTTP, or over TLS as the
    old cluster's applications do (its CA, a client certificate it signed)."""

    tls: OldTls | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def etcdctl_flags(self) -> list[str]:
        if self.tls is None:
            return []
        # No member certificate, old or new, names a pod IP, and etcdctl checks the name it
        # dials: it skips the server check. Its client certificate must still pass the
        # members' check, and the workload checks the servers (workload_tls).
        files = [f"--cacert={self.tls.ca}", f"--cert={self.tls.client_cert}", f"--key={self.tls.client_key}"]
        return [*files, "--insecure-skip-tls-verify"]

    def workload_tls(self) -> ClientTls | None:
        """The old client identity, checking each server's chain to the old CA and a name that
        the old members' certificates and the supervisor's both carry."""
        if self.tls is None:
            return None
        return ClientTls(self.tls.ca, self.tls.client_cert, self.tls.client_key, server_name="localhost")


PLAIN = Reach()


def old_host(namespace: str, pod: str) -> str:
    return f"{pod}.{OLD}.{namespace}.svc.{m.DEFAULT_CLUSTER_DOMAIN}"


def old_tls_files(namespace: str, work: Path) -> OldTls:
    """A CA of the old cluster's own, and the one certificate its members serve clients and
    peers with (named for every pod of the headless Service), as a chart's set-up makes them."""
    return generate_tls(work, server_names=[old_host(namespace, "*")])


def old_tls_flags() -> list[str]:
    """TLS for clients and peers, both authenticated by the one CA."""
    ca, cert, key = (f"{OLD_TLS_DIR}/{name}" for name in ("ca.crt", "tls.crt", "tls.key"))
    client = [f"--trusted-ca-file={ca}", f"--cert-file={cert}", f"--key-file={key}", "--client-cert-auth"]
    peer = [f"--peer-trusted-ca-file={ca}", f"--peer-cert-file={cert}", f"--peer-key-file={key}"]
    return [*client, *peer, "--peer-client-cert-auth"]


def create_old_tls_secrets(cluster: Cluster, namespace: str, files: OldTls) -> None:
    """The old members' Secret, and the two spec.adopt names: the old client identity and CA."""
    served = {"ca.crt": files.ca, "tls.crt": files.server_cert, "tls.key": files.server_key}
    secrets = {
        OLD_TLS_SECRET: {key: path.read_bytes() for key, path in served.items()},
        **adoption_secrets(files),
    }
    cluster.apply([secret_manifest(name, data) for name, data in secrets.items()], namespace=namespace)


def old_etcd(namespace: str, version: str, *, tls: bool = False) -> list[dict[str, Any]]:
    """The chart shape of an etcd: a headless Service that publishes the pods before they
    are Ready (peers must find each other to become Ready), and a StatefulSet whose pods start
    together and name each other by DNS. With `tls`, clients and peers speak TLS with the
    material of the OLD_TLS_SECRET Secret (create_old_tls_secrets)."""
    scheme = "https" if tls else "http"
    host = f"$(POD_NAME).{OLD}.{namespace}.svc.{m.DEFAULT_CLUSTER_DOMAIN}"
    initial = ",".join(f"{n}={scheme}://{old_host(namespace, n)}:2380" for n in OLD_NAMES)
    labels = {"app": OLD}
    mounts: list[dict[str, Any]] = [{"name": "data", "mountPath": "/var/lib/etcd"}]
    volumes: list[dict[str, Any]] = [{"name": "data", "emptyDir": {}}]
    if tls:
        mounts.append({"name": "tls", "mountPath": OLD_TLS_DIR, "readOnly": True})
        volumes.append({"name": "tls", "secret": {"secretName": OLD_TLS_SECRET}})
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
            f"--listen-peer-urls={scheme}://0.0.0.0:2380",
            f"--listen-client-urls={scheme}://0.0.0.0:2379",
            "--listen-metrics-urls=http://0.0.0.0:2381",  # the readiness probe's, plain either way
            f"--advertise-client-urls={scheme}://{host}:2379",
            f"--initial-advertise-peer-urls={scheme}://{host}:2380",
            f"--initial-cluster={initial}",
            "--initial-cluster-state=new",
            f"--initial-cluster-token={OLD}",
            *(old_tls_flags() if tls else []),
        ],
        "readinessProbe": {
            "httpGet": {"path": "/health?serializable=true", "port": 2381},
            "periodSeconds": 1,
            "failureThreshold": 3,
        },
        "volumeMounts": mounts,
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
                "spec": {"containers": [container], "volumes": volumes},
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


def client_urls(ips: dict[str, str], reach: Reach = PLAIN) -> list[str]:
    return [f"{reach.scheme}://{ip}:{m.CLIENT_PORT}" for _, ip in sorted(ips.items())]


def etcdctl(
    endpoints: list[str], *args: str, check: bool = True, input: str | None = None, reach: Reach = PLAIN
) -> subprocess.CompletedProcess[str]:
    """etcdctl on this host against `endpoints` (pod IPs: the host resolves no cluster name)."""
    cmd = [
        str(images.default_etcd_dir() / "etcdctl"),
        f"--endpoints={','.join(endpoints)}",
        *reach.etcdctl_flags(),
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=check, input=input)


def member_names(endpoints: list[str], reach: Reach = PLAIN) -> list[str] | None:
    """The names in etcd's member list (learners named too); None if no endpoint answers."""
    done = etcdctl(
        endpoints, "--command-timeout=5s", "member", "list", "-w", "json", check=False, reach=reach
    )
    if done.returncode:
        return None
    return sorted(mem.get("name", "") for mem in json.loads(done.stdout).get("members") or [])


def voter_names(endpoints: list[str], reach: Reach = PLAIN) -> list[str]:
    done = etcdctl(
        endpoints, "--command-timeout=5s", "member", "list", "-w", "json", check=False, reach=reach
    )
    if done.returncode:
        return []
    members = json.loads(done.stdout).get("members") or []
    return sorted(mem.get("name", "") for mem in members if not mem.get("isLearner"))


def contents(endpoints: list[str], reach: Reach = PLAIN) -> dict[str, tuple[str, int]]:
    """Every key under data/ with its value and the revision it was last written at."""
    out = json.loads(etcdctl(endpoints, "get", "data/", "--prefix", "-w", "json", reach=reach).stdout)
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


def ours(names: list[str] | None, size: int = 3) -> bool:
    """`size` members, all the EtcdCluster's own. Not necessarily NAME-0..2: a member whose
    AddLearner failed takes no ordinal of its own, the next one is numbered after it."""
    return names is not None and len(names) == size and all(re.fullmatch(rf"{NAME}-\d+", n) for n in names)


def form_old_cluster(cluster: Cluster, ns: str, reach: Reach = PLAIN) -> dict[str, tuple[str, int]]:
    """The old StatefulSet (over TLS if `reach` is), serving; KEYS keys written to it. Returns
    what it holds."""
    cluster.apply(old_etcd(ns, cluster.etcd_version, tls=reach.tls is not None), namespace=ns)

    def formed() -> bool:
        ready = ready_ips(cluster, ns, f"app={OLD}")
        return len(ready) == 3 and member_names(client_urls(ready, reach), reach) == OLD_NAMES

    wait_for("the old StatefulSet's 3 pods Ready and one cluster", formed, 120, poll=0.5)
    old_urls = client_urls(ready_ips(cluster, ns, f"app={OLD}"), reach)
    # Ten keys a transaction: twenty revisions, each key's mod_revision one of them.
    for n in range(0, KEYS, 10):
        puts = "".join(f"put data/{k:05d} value-{k}\n" for k in range(n, n + 10))
        etcdctl(old_urls, "txn", input=f"\n{puts}\n\n", reach=reach)
    written = contents(old_urls, reach)
    assert len(written) == KEYS
    return written


def adopting_cluster(
    cluster: Cluster, ns: str, s3: S3Server | None = None, reach: Reach = PLAIN
) -> dict[str, Any]:
    """The EtcdCluster that takes the old one over (with `s3`, a backup store for later; over
    TLS if `reach` is, with the Secrets of create_old_tls_secrets)."""
    adopter = etcd_cluster(NAME, cluster.etcd_version, tls=reach.tls is not None)
    adopter["spec"]["adopt"] = {
        # Short, as the old cluster's clients in this namespace write them: the operator, in
        # its own namespace or on this host, resolves them as a pod of this namespace would
        # (supervisor/kube/pod_names.py).
        "endpoints": [f"{reach.scheme}://{n}.{OLD}:{m.CLIENT_PORT}" for n in OLD_NAMES],
        "removeOld": True,
    }
    if reach.tls is not None:
        adopter["spec"]["adopt"] |= {"clientSecret": CLIENT_SECRET, "peerCASecret": PEER_CA_SECRET}
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
    cluster: Cluster, ns: str, adopter: dict[str, Any], phases: Phases, reach: Reach = PLAIN
) -> tuple[KvWorkload, list[str]]:
    """Apply `adopter` while clients work on the old members, following the membership, until
    only the new members are left and answer. Returns the workload and the phases shown."""
    new_selector = member_selector(NAME)
    workload = KvWorkload(
        endpoints=client_urls(ready_ips(cluster, ns, f"app={OLD}"), reach),
        max_operations=20_000,
        pause=0.05,
        tls=reach.workload_tls(),
    )

    def follow() -> list[str]:
        """Point the workload at every member that serves now, old and new; the new ones' URLs."""
        new = client_urls(ready_ips(cluster, ns, new_selector), reach)
        urls = client_urls(ready_ips(cluster, ns, f"app={OLD}"), reach) + new
        if urls:
            workload.endpoints[:] = urls
        return new

    def new_vote() -> bool:
        new = follow()
        return bool(new) and ours([n for n in voter_names(new, reach) if n.startswith(f"{NAME}-")])

    def old_gone() -> bool:
        new = follow()
        return bool(new) and ours(member_names(new, reach))

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
        and ours(sorted(live), size)
        and voter_names(urls) == sorted(live)
        and member_names(urls) == sorted(live)
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


def check_adopted(
    cluster: Cluster,
    ns: str,
    adopted: tuple[KvWorkload, list[str]],
    before: dict[str, tuple[str, int]],
    work: Path,
    reach: Reach = PLAIN,
) -> dict[str, tuple[str, int]]:
    """What adopt_under_workload must have done: a linearizable history, every key kept with its
    value and revision, only the new members left (removed with their Events), the phases
    Scaling then Running. Returns what the new members hold."""
    workload, shown = adopted
    verdict = check_history(workload.history, work / "history")
    print(f"  linearizability: {verdict.operations} operations checked")
    assert verdict.ok, verdict.report
    assert workload.history.count(kind="put", outcome="ok") > 0
    new_urls = client_urls(ready_ips(cluster, ns, member_selector(NAME)), reach)
    after = contents(new_urls, reach)
    assert after == before  # every key, its value and its revision: the old cluster's data, no restore
    # Until the old members left, the cluster was not at its size (the three old voters are not
    # spec.size): Scaling, never Running before.
    scaling = [i for i, p in enumerate(shown) if p == "Scaling"]
    assert scaling and "Running" not in shown[: scaling[-1]], shown
    wait_for("the EtcdCluster Running", lambda: status(cluster, ns).get("phase") == "Running", 60)
    members = sorted(mem["name"] for mem in status(cluster, ns)["members"])
    assert ours(members), members
    removed = removed_events(cluster, ns)
    assert len(removed) == 3 and all("adopted" in msg for msg in removed), removed
    return after


def test_a_statefulset_of_plain_etcd_is_adopted_live_then_heals_scales_and_backs_up(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path, s3: S3Server, tmp_path: Path
) -> None:
    checker_or_skip()
    ns, phases = e2e_namespace, Phases()
    print()
    before = form_old_cluster(e2e_cluster, ns)
    phases.done("old StatefulSet formed, keys written")

    adopted = adopt_under_workload(e2e_cluster, ns, adopting_cluster(e2e_cluster, ns, s3), phases)
    after = check_adopted(e2e_cluster, ns, adopted, before, tmp_path)
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


def test_a_statefulset_of_tls_etcd_is_adopted_live_its_ca_signing_the_new_members(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path, tmp_path: Path
) -> None:
    """Clients and peers over TLS under one CA of the old cluster's own: the new members must be
    signed by it, or the old members refuse them as peers. Adopted once; healing, scaling and
    backups are the plain test's (TLS changes none of them)."""
    checker_or_skip()
    ns, phases = e2e_namespace, Phases()
    print()
    old_tls = old_tls_files(ns, tmp_path / "old-tls")
    create_old_tls_secrets(e2e_cluster, ns, old_tls)
    reach = Reach(old_tls)
    before = form_old_cluster(e2e_cluster, ns, reach)
    phases.done("old TLS StatefulSet formed, keys written")

    adopted = adopt_under_workload(
        e2e_cluster, ns, adopting_cluster(e2e_cluster, ns, reach=reach), phases, reach
    )
    check_adopted(e2e_cluster, ns, adopted, before, tmp_path, reach)
    old_ca = x509.load_pem_x509_certificate(old_tls.ca.read_bytes())
    for pod, ip in sorted(ready_ips(e2e_cluster, ns, member_selector(NAME)).items()):
        peer = served_certificate(ip, m.PEER_PORT, old_tls.ca, old_tls.client_cert, old_tls.client_key)
        assert pki.signed_by(peer, old_ca), f"{pod}'s peer certificate is not signed by the old CA"
    phases.done("data, history and the new members' peer certificates checked")

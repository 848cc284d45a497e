"""An operator's etcd cluster on the three-node tier (tests/harness/nodes.py): where its members
run, a client workload from this host recorded for porcupine, drains and what etcd says.

Shared by tests/nodes, bench/bench_nodes.py and bench/bench_day2.py. The workload dials the
members' pod IPs (routed from this host over the nodes' bridge) and checks their certificates
against the client Service's name, which every member's certificate carries, so it needs no
cluster DNS.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import trio

from supervisor.aio import open_asyncio_loop
from supervisor.etcd.tls import TlsFiles
from supervisor.kube import manifests as m
from tests.harness.cluster import Cluster
from tests.harness.formation import is_ready, pods, wait_for
from tests.harness.history import KvWorkload, check_history
from tests.harness.nodes import Nodes

ZONE_LABEL = "topology.kubernetes.io/zone"
# etcdctl inside a member pod of a TLS cluster: the member's own certificate, as mounted.
IN_POD_TLS = [
    f"--cacert={m.TLS_DIR}/{m.TLS_CA_CERT}",
    f"--cert={m.TLS_DIR}/{m.TLS_CERT}",
    f"--key={m.TLS_DIR}/{m.TLS_KEY}",
]
IN_POD_LOCAL = ["--endpoints=https://localhost:2379", *IN_POD_TLS]


def member_selector(name: str) -> str:
    return f"{m.LABEL_INSTANCE}={name},{m.LABEL_COMPONENT}={m.COMPONENT_MEMBER}"


def live_members(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    """The cluster's member pods not being deleted."""
    found = pods(cluster, namespace, member_selector(name))
    return [p for p in found if not p["metadata"].get("deletionTimestamp")]


def node_zones(cluster: Cluster) -> dict[str, str]:
    return {
        n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE_LABEL, "")
        for n in cluster.get_json("nodes")["items"]
    }


def placement(cluster: Cluster, namespace: str, name: str) -> dict[str, str]:
    """Member pod name -> the node it was scheduled to ("" while unscheduled)."""
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in live_members(cluster, namespace, name)
    }


def endpoints(cluster: Cluster, namespace: str, name: str) -> list[str]:
    """The client URLs of the Ready members, by pod IP."""
    ready = [p for p in live_members(cluster, namespace, name) if is_ready(p) and p["status"].get("podIP")]
    return sorted(f"https://{p['status']['podIP']}:{m.CLIENT_PORT}" for p in ready)


def client_tls(cluster: Cluster, namespace: str, name: str, work: Path) -> TlsFiles:
    """The cluster's client identity, written under `work`, checked against the client Service."""
    ref = m.ClusterRef(namespace, name)
    data = cluster.get_json("secret", m.tls_secret_name(ref), namespace=namespace)["data"]
    work.mkdir(parents=True, exist_ok=True)
    for key in (m.TLS_CA_CERT, m.TLS_CLIENT_CERT, m.TLS_CLIENT_KEY):
        (work / key).write_bytes(base64.b64decode(data[key]))
    return TlsFiles(
        work / m.TLS_CA_CERT,
        work / m.TLS_CLIENT_CERT,
        work / m.TLS_CLIENT_KEY,
        server_name=m.client_service_hosts(ref)[-1],
    )


def etcdctl_json(cluster: Cluster, namespace: str, pod: str, *args: str) -> Any:
    """What one member's etcdctl answers to `args`, as JSON (a TLS cluster); None when it cannot."""
    out = cluster.kubectl(
        "exec",
        "-n",
        namespace,
        pod,
        "--",
        "etcdctl",
        *IN_POD_LOCAL,
        "--command-timeout=5s",
        *args,
        "-w",
        "json",
        check=False,
        timeout=30,
    )
    if out.returncode:
        return None
    return json.loads(out.stdout)


def etcd_members(cluster: Cluster, namespace: str, pod: str) -> list[dict[str, Any]] | None:
    """etcd's member list as one member's etcdctl tells it (a TLS cluster); None when it cannot."""
    answer = etcdctl_json(cluster, namespace, pod, "member", "list")
    return None if answer is None else list(answer.get("members") or [])


def claim_classes(cluster: Cluster, namespace: str, name: str) -> dict[str, str]:
    """The storage class of each live member's claim, by member pod."""
    found: dict[str, str] = {}
    for pod in live_members(cluster, namespace, name):
        for volume in pod["spec"].get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                pvc: dict[str, Any] = cluster.get_json("pvc", claim, namespace=namespace)
                found[pod["metadata"]["name"]] = pvc["spec"].get("storageClassName", "")
    return found


def voters(cluster: Cluster, namespace: str, name: str) -> list[str] | None:
    """The voting members' names, asked of any live member that answers; None if none does."""
    for pod in live_members(cluster, namespace, name):
        if not is_ready(pod):
            continue
        members = etcd_members(cluster, namespace, pod["metadata"]["name"])
        if members is not None:
            return sorted(mem.get("name", "") for mem in members if not mem.get("isLearner"))
    return None


def assert_one_per_node(cluster: Cluster, namespace: str, name: str) -> dict[str, str]:
    """The members' placement, every member on a node of its own (what a node test that
    takes one node away assumes: two members there would be a quorum lost, not one member)."""
    where = placement(cluster, namespace, name)
    assert len(set(where.values())) == len(where), f"members of {name} share a node: {where}"
    return where


def remove_cluster(cluster: Cluster, namespace: str, name: str, timeout: float = 120) -> None:
    """Delete the EtcdCluster (the operator running) and wait until its member pods are gone, so
    the module's next test runs beside no cluster of this one: one a lost node left with two
    members on one node would lose quorum when that node is cut off next, and add noise."""
    cluster.kubectl("delete", "etcdcluster", name, "-n", namespace, "--wait=true", timeout=timeout)
    selector = member_selector(name)
    wait_for(f"{name}'s member pods gone", lambda: not pods(cluster, namespace, selector), timeout)


def at_full_size(cluster: Cluster, namespace: str, name: str, size: int) -> bool:
    """`size` live member pods, every one Ready and scheduled, and exactly those voting."""
    live = live_members(cluster, namespace, name)
    if len(live) != size or not all(is_ready(p) for p in live):
        return False
    return voters(cluster, namespace, name) == sorted(p["metadata"]["name"] for p in live)


@attrs.define
class Gaps:
    """The longest stretch without a successful client operation (what a user would notice)."""

    workload: KvWorkload
    longest: float = 0.0

    def measure(self) -> float:
        begin, end = self.bounds()
        self.longest = (end - begin) / 1e9
        return self.longest

    def bounds(self) -> tuple[int, int]:
        """The longest stretch's two answers (time.monotonic_ns()); (0, 0) with fewer than two."""
        ok = sorted(op.returned for op in self.workload.history.operations if op.outcome == "ok")
        return max(itertools.pairwise(ok), key=lambda pair: pair[1] - pair[0], default=(0, 0))


@contextlib.contextmanager
def background(workload: KvWorkload) -> Iterator[KvWorkload]:
    """`workload` running in a thread of its own (its own trio run and asyncio loop) until the
    block ends; an error of its own is raised then."""
    stop = threading.Event()
    failure: list[BaseException] = []

    async def main() -> None:
        async with open_asyncio_loop(), trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            while not stop.is_set():
                await trio.sleep(0.1)
            nursery.cancel_scope.cancel()

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as exc:  # reported to the test when the block ends
            failure.append(exc)

    thread = threading.Thread(target=run, name="kv-workload", daemon=True)
    thread.start()
    try:
        yield workload
    finally:
        stop.set()
        thread.join(60)
    if failure:
        raise failure[0]


def read_back(workload: KvWorkload) -> None:
    """Once `workload` stopped: every key it wrote read once more and recorded (KvWorkload.read_back),
    so that assert_linearizable also finds an acknowledged put that is gone at the end."""

    async def main() -> bool:
        async with open_asyncio_loop():
            return await workload.read_back()

    assert trio.run(main), f"the keys were not all read back: {workload.history.operations[-workload.keys :]}"


def drain(cluster: Cluster, node: str, timeout: float = 600) -> float:
    """`kubectl drain` (cordon, then evict every pod through the eviction API, retrying while
    a disruption budget refuses); returns how long it took."""
    began = time.monotonic()
    cluster.kubectl(
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        f"--timeout={int(timeout)}s",
        timeout=timeout + 30,
    )
    return time.monotonic() - began


def follow(cluster: Cluster, namespace: str, name: str, workload: KvWorkload) -> None:
    """Point the workload at the members serving now (it reads the list before each call)."""
    now = endpoints(cluster, namespace, name)
    if now:
        workload.endpoints[:] = now


def workload_for(cluster: Cluster, namespace: str, name: str, work: Path, max_operations: int) -> KvWorkload:
    """A recorded client workload on the cluster's members (TLS), gentle on a shared machine."""
    return KvWorkload(
        endpoints=endpoints(cluster, namespace, name),
        tls=client_tls(cluster, namespace, name, work / "tls"),
        max_operations=max_operations,
        pause=0.02,
    )


def answers_more(workload: KvWorkload, what: str, count: int = 20, timeout: float = 60) -> None:
    done = workload.acknowledged
    wait_for(what, lambda: workload.acknowledged >= done + count, timeout, details=lambda: lately(workload))


def lately(workload: KvWorkload, last: int = 6) -> str:
    """What a workload that stopped getting answers was doing: its endpoints and last errors."""
    operations = workload.history.operations
    errors = [f"  client {o.client} {o.kind}: {o.error}" for o in operations if o.error][-last:]
    crashed = [f"the workload crashed: {workload.crashed!r}"] if workload.crashed else []
    return "\n".join(
        [f"{len(operations)} operations, {workload.acknowledged} answered; endpoints {workload.endpoints}"]
        + crashed
        + (["last errors:", *errors] if errors else ["no error recorded"])
    )


@attrs.frozen
class Drained:
    node: str
    drain_seconds: float  # `kubectl drain` returned (every eviction admitted)
    back_seconds: float  # drain began -> the cluster at full size with no member on the node


def drain_each(
    cluster: Cluster, namespace: str, name: str, workload: KvWorkload, size: int = 3
) -> list[Drained]:
    """Drain every node in turn, each uncordoned once the cluster is back at `size` voters off it."""
    out = []
    for node in sorted(node_zones(cluster)):
        began = time.monotonic()
        drained = drain(cluster, node)

        def back(node: str = node) -> bool:
            follow(cluster, namespace, name, workload)
            off = node not in placement(cluster, namespace, name).values()
            return off and at_full_size(cluster, namespace, name, size)

        wait_for(f"{name} back at {size} voters off {node}", back, 300, poll=1.0)
        out.append(Drained(node, drained, time.monotonic() - began))
        cluster.kubectl("uncordon", node)
        print(f"{node}: drained in {drained:.1f}s, full size again after {out[-1].back_seconds:.1f}s")
    return out


@attrs.frozen
class Lost:
    node: str
    member: str  # the member that was on it
    seconds: float  # node stopped -> the cluster at full size on the other nodes


def lose_node(
    nodes: Nodes,
    cluster: Cluster,
    namespace: str,
    name: str,
    workload: KvWorkload,
    size: int = 3,
    *,
    member: str | None = None,
    cut_off: bool = False,
) -> Lost:
    """Stop the node of `member` (default: the cluster's first by name), or with `cut_off`
    partition it from everything while it runs on, until the cluster is back at `size` voters
    on the other nodes; the node is started again or healed (and Ready) whatever happened."""
    where = placement(cluster, namespace, name)
    member = member or sorted(where)[0]
    node = where[member]
    began = time.monotonic()
    if cut_off:
        nodes.partition(node)  # its pods and kubelet run on, reaching nothing and reached by nothing
    else:
        nodes.stop(node)  # its pods frozen, its kubelet and containerd killed
    try:

        def replaced() -> bool:
            follow(cluster, namespace, name, workload)
            off = all(p["spec"].get("nodeName") != node for p in live_members(cluster, namespace, name))
            return off and at_full_size(cluster, namespace, name, size)

        wait_for(f"{member} replaced off the lost {node}", replaced, 480, poll=1.0)
        seconds = time.monotonic() - began
        how = "cut off" if cut_off else "lost"
        print(f"{node} {how} ({member}): back at {size} voters on the other nodes after {seconds:.1f}s")
    finally:
        if cut_off:
            nodes.heal(node)
        else:
            nodes.start(node)
    nodes.wait_ready(node)
    return Lost(node, member, seconds)


def assert_linearizable(workload: KvWorkload, directory: Path) -> None:
    """The workload's history checked with porcupine; prints how it went (and the longest gap)."""
    result = check_history(workload.history, directory)
    failed = sum(1 for op in workload.history.operations if op.outcome != "ok")
    print(
        f"{len(workload.history.operations)} operations, {failed} not ok, longest gap without an answer "
        f"{Gaps(workload).measure():.1f}s; {result.report}"
    )
    assert result.ok, f"not linearizable: {result.report} ({result.visualization})"

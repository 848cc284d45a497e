"""Day-2 changes of a running cluster on the three-node tier: a `resources` rollout against bare
restarts, and a storage class migration of a cluster holding data.

Issue 29's measures, on real kubelets and pods (the harness of bench_nodes.py and tests/nodes):

- rollout: per run, a fresh 3-member TLS EtcdCluster; first the reference, three single-member
  restarts one after another (each member's pod deleted in turn, the operator makes it again on
  its own volume; timed from the delete to that member's new pod Ready beside the other two),
  then `spec.resources` patched (a memory request) -> every member pod running with it, all three
  Ready (the operator rolls one member at a time, healthy-gated, the leader last). Both are timed
  to the event with a watch on the member pods, and the cluster is checked at three voters (etcd's
  own member list) after each. Reported: the medians over BENCH_RUNS runs (default 3) and the
  median of each run's rollout / sum of its three restarts: what the rollout's gating costs
  over bare restarts.
- storage: a 3-member TLS cluster given BENCH_DAY2_MIB MiB (default 256) in 512 KiB values under
  distinct keys (below etcd's 1.5 MiB request limit, far below its 2 GiB quota), then
  `spec.storage.storageClassName` changed to a second node-local class while a small client
  workload puts and gets throughout -> every member on a claim of the new class and the cluster
  at three voters. Reported: the total time, when each new member (a learner at first) appeared,
  the longest stretch without a successful client operation, and each new member's database
  size and the key count (the data came along). BENCH_DAY2_STORAGE_RUNS runs (default 3), the
  medians of the two timings.

Prints the figures and writes bench/results/day2.json. Needs root and the nodes' components
(`make setup`); the operator runs on this host as in tests/nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attrs
import trio

from bench.node_operator import namespace, operator_on_nodes
from bench.report import median_line, write_result
from supervisor.aio import open_asyncio_loop
from supervisor.etcd.client import EtcdClient, open_etcd_client
from supervisor.etcd.tls import TlsFiles
from tests.harness import members_on_nodes as on
from tests.harness.cluster import Cluster
from tests.harness.formation import form_cluster, wait_for
from tests.harness.nodes import ROOT, Nodes
from tests.harness.watch import KubectlWatch

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
DATA_MIB = int(os.environ.get("BENCH_DAY2_MIB", "256"))
STORAGE_RUNS = int(os.environ.get("BENCH_DAY2_STORAGE_RUNS", "3"))  # each fills and moves DATA_MIB
MiB = 2**20
VALUE_BYTES = 512 * 1024  # a third of etcd's default request limit (1.5 MiB): room for the key
DATA_PREFIX = "bench-day2/"
FILL_WRITERS = 4  # concurrent puts while filling: enough to keep the members' disks busy
SIZE = 3
NEW_MEMORY = "64Mi"  # the members run without requests before the patch
NEW_CLASS = "local-second"  # the second node-local class, as tests/nodes/test_storage_migration.py
# Far more than a migration takes: the workload must still be running when it ends, or the
# longest gap would stop being measured.
WORKLOAD_OPERATIONS = 400_000

# One line per member pod event: uid|name|being deleted since|Ready|the etcd container's memory request.
MEMBER_LINE = (
    "{.metadata.uid}|{.metadata.name}|{.metadata.deletionTimestamp}"
    "|{.status.conditions[?(@.type=='Ready')].status}"
    "|{.spec.containers[?(@.name=='etcd')].resources.requests.memory}{'\\n'}"
)


@attrs.frozen
class MemberPod:
    uid: str
    name: str
    ready: bool
    memory: str


def live_pods(lines: list[str]) -> list[MemberPod]:
    """The member pods as the watch last showed them, those being deleted left out (a deleted
    pod's last event carries its deletionTimestamp)."""
    latest: dict[str, tuple[bool, MemberPod]] = {}
    for line in lines:
        uid, name, deleting, ready, memory = line.split("|")
        latest[uid] = (bool(deleting), MemberPod(uid, name, ready == "True", memory))
    return [pod for deleting, pod in latest.values() if not deleting]


def all_ready(pods: list[MemberPod], new: Callable[[MemberPod], bool]) -> bool:
    """SIZE pods of distinct members, every one Ready and `new`."""
    return len({p.name for p in pods}) == len(pods) == SIZE and all(p.ready and new(p) for p in pods)


def member_watch(cluster: Cluster, ns: str, name: str) -> KubectlWatch:
    return KubectlWatch(cluster.kubeconfig, ["pods", "-n", ns, "-l", on.member_selector(name)], MEMBER_LINE)


def at_three_voters(cluster: Cluster, ns: str, name: str) -> None:
    """etcd's own word that the three members vote (pods Ready say each serves, not that it votes)."""
    wait_for(f"{name} at {SIZE} voters", lambda: on.at_full_size(cluster, ns, name, SIZE), 120, poll=1.0)


def time_restart(cluster: Cluster, ns: str, name: str, pod: str) -> float:
    """`pod` deleted -> the operator's new pod of that member Ready, beside the other two."""
    old = cluster.get_json("pod", pod, namespace=ns)["metadata"]["uid"]
    with member_watch(cluster, ns, name) as watch:
        began = time.monotonic()
        cluster.kubectl("delete", "pod", pod, "-n", ns, "--wait=false")
        back = watch.until(
            f"{pod} made again and Ready",
            lambda lines: all_ready(live_pods(lines), lambda p: p.uid != old),
            300,
        )
    at_three_voters(cluster, ns, name)
    return back - began


def time_rollout(cluster: Cluster, ns: str, name: str) -> float:
    """`spec.resources` patched -> every member pod running with the new request, all Ready."""
    patch = json.dumps({"spec": {"resources": {"requests": {"memory": NEW_MEMORY}}}})
    with member_watch(cluster, ns, name) as watch:
        began = time.monotonic()
        cluster.kubectl("patch", "etcdcluster", name, "-n", ns, "--type=merge", "-p", patch)
        rolled = watch.until(
            f"every member of {name} with a {NEW_MEMORY} request, Ready",
            lambda lines: all_ready(live_pods(lines), lambda p: p.memory == NEW_MEMORY),
            600,
        )
    at_three_voters(cluster, ns, name)
    return rolled - began


@attrs.frozen
class RolloutRun:
    restarts: list[float]  # each member's restart, in turn
    rollout: float

    @property
    def ratio(self) -> float:
        return self.rollout / sum(self.restarts)


def rollout_run(cluster: Cluster, i: int) -> RolloutRun:
    with namespace(cluster, f"bench-roll-{i}") as ns:
        form_cluster(cluster, ns, "rolled", tls=True)
        restarts = [
            time_restart(cluster, ns, "rolled", pod) for pod in sorted(on.placement(cluster, ns, "rolled"))
        ]
        run = RolloutRun(restarts, time_rollout(cluster, ns, "rolled"))
    each = ", ".join(f"{s:.1f}" for s in run.restarts)
    print(
        f"  run {i + 1}: three restarts {sum(run.restarts):.1f} s ({each}); "
        f"resources rollout {run.rollout:.1f} s; ratio {run.ratio:.2f}x"
    )
    return run


def rollout(cluster: Cluster, runs: int) -> dict[str, Any]:
    done = [rollout_run(cluster, i) for i in range(runs)]
    restarts = [sum(r.restarts) for r in done]
    rollouts = [r.rollout for r in done]
    ratios = [r.ratio for r in done]
    print(median_line("three single-member restarts", restarts, f"({runs} runs)"))
    print(median_line(f"resources rollout ({NEW_MEMORY} request)", rollouts, f"({runs} runs)"))
    print(
        f"  ratio rollout / three restarts: median {statistics.median(ratios):.2f}x "
        f"[{min(ratios):.2f}..{max(ratios):.2f}]"
    )
    return {
        "runs": runs,
        "restarts_each_s": [r.restarts for r in done],
        "restarts_s": restarts,
        "rollout_s": rollouts,
        "ratios": ratios,
        "median_restarts_s": statistics.median(restarts),
        "median_rollout_s": statistics.median(rollouts),
        "median_ratio": statistics.median(ratios),
    }


async def fill(urls: list[str], tls: TlsFiles, mib: int) -> None:
    """`mib` MiB in VALUE_BYTES values, each under a key of its own, FILL_WRITERS at a time."""
    keys = iter(range(mib * MiB // VALUE_BYTES))
    value = os.urandom(VALUE_BYTES)  # random: no compression anywhere makes the copy cheaper

    async def writer(etcd: EtcdClient) -> None:
        for n in keys:
            await etcd.put(f"{DATA_PREFIX}{n:06d}".encode(), value)

    async with (
        open_asyncio_loop(),
        open_etcd_client(urls, tls=tls, call_timeout=30) as etcd,
        trio.open_nursery() as nursery,
    ):
        for _ in range(FILL_WRITERS):
            nursery.start_soon(writer, etcd)


def time_fill(cluster: Cluster, ns: str, name: str, work: Path) -> float:
    urls, tls = on.endpoints(cluster, ns, name), on.client_tls(cluster, ns, name, work / "fill-tls")
    began = time.monotonic()
    trio.run(fill, urls, tls, DATA_MIB)
    return time.monotonic() - began


def data_on_members(cluster: Cluster, ns: str, name: str) -> dict[str, Any]:
    """Each member's database size (MiB) and the keys under DATA_PREFIX, as etcdctl in the pods says."""
    pods = sorted(p["metadata"]["name"] for p in on.live_members(cluster, ns, name))
    db_mib = {}
    for pod in pods:
        status = on.etcdctl_json(cluster, ns, pod, "endpoint", "status")
        db_mib[pod] = round(status[0]["Status"]["dbSize"] / MiB, 1) if status else None
    # Keys only: etcdctl's --count-only refuses JSON output.
    counted = on.etcdctl_json(cluster, ns, pods[0], "get", DATA_PREFIX, "--prefix", "--keys-only")
    return {"db_mib": db_mib, "keys": counted.get("count", 0) if counted else None}


@attrs.define
class Migration:
    """Polled progress of a class change: when each member on a claim of the new class was
    first seen (a learner at first: the old member it replaces is removed before it is added)."""

    began: float
    new_claims_at: list[float] = attrs.field(factory=list)

    def moved(self, cluster: Cluster, ns: str, name: str) -> bool:
        classes = on.claim_classes(cluster, ns, name)
        on_new = sum(1 for c in classes.values() if c == NEW_CLASS)
        seen = self.new_claims_at
        while len(seen) < min(on_new, SIZE):
            seen.append(time.monotonic() - self.began)
            print(f"    member {len(seen)} of {SIZE} on {NEW_CLASS} after {seen[-1]:.1f} s")
        return on_new == len(classes) and on.at_full_size(cluster, ns, name, SIZE)


def time_migration(cluster: Cluster, ns: str, name: str, work: Path) -> dict[str, Any]:
    """The class changed under a client workload -> every member on the new class, three voters."""
    workload = on.workload_for(cluster, ns, name, work, max_operations=WORKLOAD_OPERATIONS)
    with on.background(workload):
        on.answers_more(workload, "the workload's first answers")
        migration = Migration(time.monotonic())
        patch = json.dumps({"spec": {"storage": {"storageClassName": NEW_CLASS}}})
        cluster.kubectl("patch", "etcdcluster", name, "-n", ns, "--type=merge", "-p", patch)

        def moved() -> bool:
            on.follow(cluster, ns, name, workload)
            return migration.moved(cluster, ns, name)

        wait_for(f"{name} at {SIZE} voters, all on {NEW_CLASS}", moved, 1500, poll=1.0)
        total = time.monotonic() - migration.began
        on.answers_more(workload, "the workload's answers after the move")
    history = workload.history
    return {
        "total_s": total,
        "new_claims_s": migration.new_claims_at,
        "longest_gap_s": on.Gaps(workload).measure(),
        "client_operations": len(history.operations),
        "client_not_ok": history.count(outcome="failed") + history.count(outcome="unknown"),
    }


def storage_run(cluster: Cluster, i: int) -> dict[str, Any]:
    name, work = "moved", ROOT / "bench" / f"day2-storage-{i}"
    with namespace(cluster, f"bench-move-{i}") as ns:
        form_cluster(cluster, ns, name, tls=True)
        filled = time_fill(cluster, ns, name, work)
        before = data_on_members(cluster, ns, name)
        print(f"  run {i + 1}: {DATA_MIB} MiB written in {filled:.1f} s; before: {before}")
        run = {"fill_s": filled, "before": before, **time_migration(cluster, ns, name, work)}
        run["after"] = data_on_members(cluster, ns, name)
    print(
        f"  run {i + 1}: class change -> {SIZE} voters on {NEW_CLASS} {run['total_s']:.1f} s, longest client "
        f"gap {run['longest_gap_s']:.2f} s; after: {run['after']}; {run['client_operations']} client "
        f"operations, {run['client_not_ok']} not ok"
    )
    return run


def storage_migration(nodes: Nodes, cluster: Cluster, runs: int) -> dict[str, Any]:
    # Room for the new members of every run: the volumes of the old ones are recycled meanwhile.
    nodes.add_storage_class(NEW_CLASS, per_node=3, first=100)
    done = [storage_run(cluster, i) for i in range(runs)]
    totals, gaps = [r["total_s"] for r in done], [r["longest_gap_s"] for r in done]
    print(median_line(f"class change with {DATA_MIB} MiB -> 3 voters", totals, f"({runs} runs)"))
    print(median_line("longest client gap", gaps, f"({runs} runs)"))
    return {
        "data_mib": DATA_MIB,
        "value_bytes": VALUE_BYTES,
        "keys_written": DATA_MIB * MiB // VALUE_BYTES,
        "runs": done,
        "median_total_s": statistics.median(totals),
        "median_longest_gap_s": statistics.median(gaps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["rollout", "storage"], help="one measure alone")
    args = parser.parse_args()
    with operator_on_nodes("bench_day2", "operator-day2.log") as ready:
        if ready is None:
            return
        nodes, cluster = ready
        result: dict[str, Any] = {"etcd_version": cluster.etcd_version}
        if args.only in (None, "rollout"):
            print(f"resources rollout vs three restarts, {RUNS} runs:")
            result["rollout"] = rollout(cluster, RUNS)
            write_result("day2", result)  # kept should the storage measure fail
        if args.only in (None, "storage"):
            print(f"storage class change with {DATA_MIB} MiB, {STORAGE_RUNS} runs:")
            result["storage"] = storage_migration(nodes, cluster, STORAGE_RUNS)
    print(f"(machine: {os.cpu_count()} cores, shared and noisy: compare the ratios, not the seconds)")
    write_result("day2", result)


if __name__ == "__main__":
    main()

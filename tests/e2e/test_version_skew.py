"""Version skew on real pods (issue 31), under a client workload recorded for porcupine: a TLS
cluster's rolling upgrade 3.6 -> 3.7 whose operator is killed (SIGKILL, no goodbye) after the
first member rolled resumes under the next operator, each member rolled once and nothing written
lost; a 3.7 release whose etcd fails to start stops the rollout at its first member, saying why,
while the other members keep serving on 3.7.3; then back to 3.6 through etcd's downgrade API,
the same members on their own data, the cluster version 3.6.0 at the end."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.harness import images
from tests.harness import members_on_nodes as on
from tests.harness.cluster import Cluster
from tests.harness.formation import (
    POD_LINE,
    form_cluster,
    import_pinned_etcd,
    kill_operator,
    run_operator,
    wait_for,
)
from tests.harness.history import KvWorkload
from tests.harness.node import ROOT
from tests.harness.watch import KubectlWatch

NAME = "skew"
BROKEN = "3.7.99"  # an image tagged so, whose etcd exits at once
SELECTOR = on.member_selector(NAME)


@attrs.define
class Skew:
    """The test's EtcdCluster, the operator's Events about it, and the workload following its
    members (a rolled member's pod comes back with another IP)."""

    cluster: Cluster
    namespace: str
    workload: KvWorkload | None = None

    def status(self) -> dict[str, Any]:
        if self.workload is not None:
            on.follow(self.cluster, self.namespace, NAME, self.workload)
        return dict(self.cluster.get_json("etcdcluster", NAME, namespace=self.namespace).get("status") or {})

    def versions(self) -> list[str]:
        """The versions the healthy members report, sorted."""
        return sorted(x.get("version", "") for x in self.status().get("members") or [] if x.get("healthy"))

    def settled_on(self, version: str, cluster_version: str) -> bool:
        s = self.status()
        members = sorted(x.get("version", "") for x in s.get("members") or [] if x.get("healthy"))
        return (
            s.get("phase") == "Running" and members == [version] * 3 and s.get("version") == cluster_version
        )

    def condition(self, kind: str) -> dict[str, Any]:
        return {c["type"]: c for c in self.status().get("conditions") or []}.get(kind) or {}

    def member_ids(self) -> dict[str, str]:
        return {x["name"]: x["id"] for x in self.status().get("members") or []}

    def set_version(self, version: str) -> None:
        patch = json.dumps({"spec": {"version": version}})
        self.cluster.kubectl(
            "patch", "-n", self.namespace, f"etcdcluster/{NAME}", "--type=merge", "-p", patch
        )

    def events(self, reason: str) -> list[str]:
        items = self.cluster.get_json("events", namespace=self.namespace)["items"]
        return [
            e["message"]
            for e in items
            if e["reason"] == reason and e["involvedObject"]["kind"] == "EtcdCluster"
        ]

    def etcdctl(self, *args: str) -> str:
        """etcdctl in the first member pod that runs it (one may be down for its restart)."""
        for pod in (f"{NAME}-0", f"{NAME}-1", f"{NAME}-2"):
            done = self.cluster.kubectl(
                "exec", "-n", self.namespace, pod, "--", "etcdctl", *on.IN_POD_LOCAL, *args, check=False
            )
            if done.returncode == 0:
                return done.stdout.strip()
        raise AssertionError(f"etcdctl {' '.join(args)}: no member pod ran it: {done.stderr}")


def pods_seen(watch: KubectlWatch, since: int = 0) -> dict[str, int]:
    """Member pod name -> how many pods of that name the watch saw from its line `since` on
    (the lines of the pods running then included: their deletion is among them)."""
    uids: dict[str, set[str]] = {}
    for uid, pod, *_ in (line.split() for line in watch.drain()[since:]):
        uids.setdefault(pod, set()).add(uid)
    return {pod: len(seen) for pod, seen in uids.items()}


def broken_release_stops_the_rollout(skew: Skew, new: str) -> None:
    """spec.version names a release whose etcd exits at once: the first member tried stops the
    rollout, the others serve on; going back to `new` brings that member back."""
    skew.set_version(BROKEN)

    def stopped() -> dict[str, Any] | None:
        found = skew.condition("Upgrading")
        return found if found.get("reason") == "MemberFailedToStart" else None

    upgrading = wait_for("the rollout stopped at a member that fails to start", stopped, 180, poll=0.5)
    assert upgrading["status"] == "False", upgrading
    assert "2 of 3 members left as they were" in upgrading["message"], upgrading
    time.sleep(3)
    assert skew.versions() == [new, new], skew.status()  # the others serve on, the cluster available
    assert skew.condition("Available")["status"] == "True", skew.status()
    assert not skew.events("MemberRemoved")

    skew.set_version(new)  # back to the release the others run: the member comes back
    wait_for(f"every member on {new} again", lambda: skew.versions() == [new] * 3, 180, poll=0.5)


def downgrade(skew: Skew, watch: KubectlWatch, old: str, ids: dict[str, str]) -> float:
    """Back one minor to `old` through etcd's downgrade API: enabled, then each member's pod
    replaced once, the same etcd members on their own data (a fresh member would need no
    downgrade), the cluster version `old`'s minor at the end. Returns how long it took."""
    since = len(watch.drain())  # what the upgrade and the broken release did is not counted
    minor = old.rsplit(".", 1)[0] + ".0"
    assert not skew.events("DowngradeEnabled")
    start = time.monotonic()
    skew.set_version(old)
    wait_for(f"every member on {old}, cluster version {minor}", lambda: skew.settled_on(old, minor), 300, 0.5)
    seconds = time.monotonic() - start
    enabled = skew.events("DowngradeEnabled")
    assert len(enabled) == 1 and minor in enabled[0], enabled  # enabled once, towards 3.6.0
    assert pods_seen(watch, since) == dict.fromkeys(ids, 2), "each member's pod replaced once"
    assert skew.member_ids() == ids
    assert not skew.events("MemberRemoved")
    return seconds


def test_an_upgrade_interrupted_by_an_operator_crash_resumes_a_broken_release_stops_it_and_it_downgrades(
    e2e_cluster: Cluster, e2e_namespace: str, operator_image: str, tmp_path: Path
) -> None:
    if e2e_cluster.node is None:  # an external cluster (E2E_KUBECONFIG)
        pytest.skip("other etcd versions are imported on the built-in node only")
    old, new = import_pinned_etcd(e2e_cluster, "3.6"), import_pinned_etcd(e2e_cluster, "3.7")
    e2e_cluster.node.import_image(images.broken_etcd_archive(ROOT / "images", BROKEN))
    skew = Skew(e2e_cluster, e2e_namespace)
    logs, work = ROOT / "logs", ROOT / "operator"

    def operator(n: int) -> contextlib.AbstractContextManager[Path]:
        log = logs / f"operator-{e2e_namespace}-{n}.log"
        return run_operator(e2e_cluster, e2e_namespace, work, log, helper_image=operator_image)

    # The watch of the member pods and the workload (entered once the cluster is formed) span
    # both operators.
    with contextlib.ExitStack() as stack:
        with operator(1):
            form_cluster(e2e_cluster, e2e_namespace, NAME, tls=True, version=old)
            wait_for("members report their version", lambda: len(skew.versions()) == 3, 30)
            ids = skew.member_ids()
            watch = stack.enter_context(
                KubectlWatch(e2e_cluster.kubeconfig, ["pods", "-n", e2e_namespace, "-l", SELECTOR], POD_LINE)
            )
            workload = on.workload_for(e2e_cluster, e2e_namespace, NAME, tmp_path, max_operations=40_000)
            skew.workload = stack.enter_context(on.background(workload))
            on.answers_more(workload, "the workload's first answers")
            skew.etcdctl("put", "written-on", old)
            skew.set_version(new)
            wait_for(f"one member on {new}", lambda: skew.versions().count(new) == 1, 120, poll=0.2)
            kill_operator(e2e_namespace)
            rolled_before = len(skew.events("MemberRolled"))
        # Nobody tends the cluster: it serves on mixed versions meanwhile.
        skew.etcdctl("put", "written-while-no-operator-ran", "yes")

        with operator(2):
            start = time.monotonic()
            wait_for(
                f"every member on {new}, cluster version 3.7.0",
                lambda: skew.settled_on(new, "3.7.0"),
                300,
                poll=0.5,
            )
            print(f"\nthe rollout resumed by the next operator: {time.monotonic() - start:.2f}s")
            # Each member's pod replaced once across both operators (a member whose pod the first
            # one had deleted as it was killed is started on 3.7 by the second: MemberStarted), and
            # the same etcd members: none was replaced.
            assert pods_seen(watch) == dict.fromkeys(ids, 2)
            assert skew.member_ids() == ids
            assert rolled_before >= 1 and not skew.events("MemberRemoved")
            on.answers_more(workload, f"the workload's answers on {new}")

            broken_release_stops_the_rollout(skew, new)
            seconds = downgrade(skew, watch, old, ids)
            print(f"the downgrade to {old}: {seconds:.2f}s")
            on.answers_more(workload, f"the workload's answers on {old}")
    on.read_back(workload)
    on.assert_linearizable(workload, tmp_path / "history")
    assert skew.etcdctl("get", "written-on", "--print-value-only") == old
    assert skew.etcdctl("get", "written-while-no-operator-ran", "--print-value-only") == "yes"

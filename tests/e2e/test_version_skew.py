"""Version skew on real pods (issue 31): a rolling upgrade 3.6 -> 3.7 whose operator is killed
(SIGKILL, no goodbye) after the first member rolled resumes under the next operator, each member
rolled once and nothing written lost; then a 3.7 release whose etcd fails to start stops the
rollout at its first member, saying why, while the other members keep serving on 3.7.3."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from typing import Any

import pytest

from supervisor.kube import manifests as m
from tests.harness import images
from tests.harness.cluster import Cluster
from tests.harness.formation import POD_LINE, form_cluster, import_pinned_etcd, run_operator, wait_for
from tests.harness.node import ROOT
from tests.harness.watch import KubectlWatch

BROKEN = "3.7.99"  # an image tagged so, whose etcd exits at once
SELECTOR = f"{m.LABEL_INSTANCE}=skew,{m.LABEL_COMPONENT}={m.COMPONENT_MEMBER}"


def events(cluster: Cluster, namespace: str, reason: str) -> list[str]:
    items = cluster.get_json("events", namespace=namespace)["items"]
    return [
        e["message"] for e in items if e["reason"] == reason and e["involvedObject"]["kind"] == "EtcdCluster"
    ]


def kill_operator(namespace: str) -> None:
    """SIGKILL the operator watching `namespace` (its process group: the wrapper and the daemon)."""
    found = subprocess.run(["pgrep", "-f", f"--namespace {namespace}"], capture_output=True, text=True)
    for pid in found.stdout.split():
        subprocess.run(["kill", f"-{signal.SIGKILL.value}", pid], check=False)


def test_an_upgrade_interrupted_by_an_operator_crash_resumes_and_a_broken_release_stops_it(
    e2e_cluster: Cluster, e2e_namespace: str, operator_image: str
) -> None:
    if e2e_cluster.node is None:  # an external cluster (E2E_KUBECONFIG)
        pytest.skip("other etcd versions are imported on the built-in node only")
    old, new = import_pinned_etcd(e2e_cluster, "3.6"), import_pinned_etcd(e2e_cluster, "3.7")
    e2e_cluster.node.import_image(images.broken_etcd_archive(ROOT / "images", BROKEN))
    ns = ["-n", e2e_namespace]
    logs = ROOT / "logs"

    def status() -> dict[str, Any]:
        return dict(e2e_cluster.get_json("etcdcluster", "skew", namespace=e2e_namespace).get("status") or {})

    def versions() -> list[str]:
        return sorted(x.get("version", "") for x in status().get("members") or [] if x.get("healthy"))

    def set_version(version: str) -> None:
        patch = json.dumps({"spec": {"version": version}})
        e2e_cluster.kubectl("patch", *ns, "etcdcluster/skew", "--type=merge", "-p", patch)

    def etcdctl(*args: str) -> str:
        """etcdctl in the first member pod that runs it (one may be down for its restart)."""
        for pod in ("skew-0", "skew-1", "skew-2"):
            done = e2e_cluster.kubectl("exec", *ns, pod, "--", "etcdctl", *args, check=False)
            if done.returncode == 0:
                return done.stdout.strip()
        raise AssertionError(f"etcdctl {' '.join(args)}: no member pod ran it: {done.stderr}")

    def member_ids() -> dict[str, str]:
        return {x["name"]: x["id"] for x in status().get("members") or []}

    work = ROOT / "operator"
    # The watch of the member pods (entered once the cluster is formed) ends with the test.
    with contextlib.ExitStack() as stack:
        with run_operator(
            e2e_cluster,
            e2e_namespace,
            work,
            logs / f"operator-{e2e_namespace}-1.log",
            helper_image=operator_image,
        ):
            form_cluster(e2e_cluster, e2e_namespace, "skew", tls=False, version=old)
            wait_for("members report their version", lambda: len(versions()) == 3, 30)
            ids = member_ids()
            watch = stack.enter_context(
                KubectlWatch(e2e_cluster.kubeconfig, ["pods", *ns, "-l", SELECTOR], POD_LINE)
            )
            etcdctl("put", "written-on", old)
            set_version(new)
            wait_for(f"one member on {new}", lambda: versions().count(new) == 1, 120, poll=0.2)
            kill_operator(e2e_namespace)
            rolled_before = len(events(e2e_cluster, e2e_namespace, "MemberRolled"))
        # Nobody tends the cluster: it serves on mixed versions meanwhile.
        etcdctl("put", "written-while-no-operator-ran", "yes")

        with run_operator(
            e2e_cluster,
            e2e_namespace,
            work,
            logs / f"operator-{e2e_namespace}-2.log",
            helper_image=operator_image,
        ):
            start = time.monotonic()

            def settled() -> bool:
                s = status()
                return s.get("phase") == "Running" and versions() == [new] * 3 and s.get("version") == "3.7.0"

            wait_for(f"every member on {new}, cluster version 3.7.0", settled, 300, poll=0.5)
            print(f"\nthe rollout resumed by the next operator: {time.monotonic() - start:.2f}s")
            # Each member's pod replaced once across both operators (a member whose pod the first
            # one had deleted as it was killed is started on 3.7 by the second: MemberStarted), and
            # the same etcd members: none was replaced.
            uids = {}
            for uid, pod, *_ in (line.split() for line in watch.drain()):
                uids.setdefault(pod, set()).add(uid)
            assert {pod: len(seen) for pod, seen in uids.items()} == dict.fromkeys(ids, 2), uids
            assert member_ids() == ids
            assert rolled_before >= 1 and not events(e2e_cluster, e2e_namespace, "MemberRemoved")
            assert etcdctl("get", "written-on", "--print-value-only") == old
            assert etcdctl("get", "written-while-no-operator-ran", "--print-value-only") == "yes"

            set_version(BROKEN)

            def stopped() -> dict[str, Any] | None:
                found = {c["type"]: c for c in status().get("conditions") or []}.get("Upgrading") or {}
                return found if found.get("reason") == "MemberFailedToStart" else None

            upgrading = wait_for(
                "the rollout stopped at a member that fails to start", stopped, 180, poll=0.5
            )
            assert upgrading["status"] == "False", upgrading
            assert "2 of 3 members left as they were" in upgrading["message"], upgrading
            time.sleep(3)
            assert versions() == [new, new], status()  # the others serve on, the cluster available
            available = {c["type"]: c for c in status()["conditions"]}["Available"]
            assert available["status"] == "True", available
            assert not events(e2e_cluster, e2e_namespace, "MemberRemoved")

            set_version(new)  # back to the release the others run: the member comes back
            wait_for(f"every member on {new} again", lambda: versions() == [new] * 3, 180, poll=0.5)

"""Quorum-loss recovery on real pods (spec.disasterRecovery.mode: Automatic), the survivor path.

Two of three members lose their volumes (claim and pod deleted) while the operator is down: they
can never come back, so the quorum is lost for good. The operator restarts the surviving
member's pod alone with --force-new-cluster on its own data, deletes the lost members and grows
the cluster back by learners; what was written before the loss is there, and
status.lastRecovery says how. The operator runs as a host process, as in test_members.py.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from supervisor.kube import manifests as m
from tests.e2e.cluster import Cluster
from tests.e2e.formation import etcd_cluster, wait_for
from tests.e2e.test_members import IN_POD_LOCAL


def test_automatic_recovery_rebuilds_from_the_surviving_member_when_two_of_three_volumes_are_lost(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path
) -> None:
    ns = ["-n", e2e_namespace]
    cluster = etcd_cluster("dr", e2e_cluster.etcd_version, tls=True)
    cluster["spec"]["disasterRecovery"] = {"mode": "Automatic"}
    e2e_cluster.apply([cluster], namespace=e2e_namespace)

    def status() -> dict:
        return e2e_cluster.get_json("etcdcluster", "dr", namespace=e2e_namespace).get("status") or {}

    def formed() -> bool:
        found = status()
        names = {mem["name"] for mem in found.get("members", []) if mem.get("healthy")}
        return found.get("phase") == "Running" and names == {"dr-0", "dr-1", "dr-2"}

    wait_for("EtcdCluster dr Running with dr-0, dr-1 and dr-2 healthy", formed, 180)
    put = e2e_cluster.kubectl(
        "exec", *ns, "dr-0", "--", "etcdctl", *IN_POD_LOCAL, "put", "kept", "yes", "-w", "json"
    )
    kept_at = int(json.loads(put.stdout)["header"]["revision"])

    # Both volumes go while the operator is down (frozen), so it finds the majority lost at once:
    # awake, it would remove the first lost member while the second still answered, as a data
    # loss with quorum kept (test_members.py), and no quorum would ever be lost.
    with frozen(operator_pids(e2e_namespace)):
        for lost in ("dr-1", "dr-2"):
            e2e_cluster.kubectl("delete", "pod", *ns, lost, "--wait=false", "--grace-period=0", "--force")
            e2e_cluster.kubectl("delete", "pvc", *ns, m.volume_claim_name(lost), "--wait=false")
        wait_for(
            "the lost members' pods and claims gone",
            lambda: (
                not e2e_cluster.kubectl(
                    "get", "pods,pvc", *ns, "-o", "name", "--selector", f"{m.LABEL_MEMBER} in (dr-1,dr-2)"
                ).stdout.strip()
            ),
            120,
            poll=1.0,
        )
    start = time.monotonic()

    def recovered() -> dict | None:
        found = status()
        names = {mem["name"] for mem in found.get("members", [])}
        back = found.get("phase") == "Running" and found.get("readyReplicas") == 3 and len(names) == 3
        return found if back and found.get("lastRecovery") else None

    found = wait_for("dr rebuilt from dr-0 and grown back to 3 members", recovered, 300, poll=1.0)
    print(f"\ntwo of three volumes lost -> recovered, 3 members Running in {time.monotonic() - start:.1f}s")
    print(f"lastRecovery: {found['lastRecovery']}")
    assert found["lastRecovery"]["path"] == "Survivor" and found["lastRecovery"]["source"] == "dr-0"
    # The revision reported is the survivor's own when it was rebuilt: the key is at or below it.
    assert int(found["lastRecovery"]["revision"]) >= kept_at, (found["lastRecovery"], kept_at)
    newcomer = next(mem["name"] for mem in found["members"] if mem["name"] != "dr-0")
    got = e2e_cluster.kubectl(
        "exec",
        *ns,
        newcomer,
        "--",
        "etcdctl",
        *IN_POD_LOCAL,
        "get",
        "--consistency=s",
        "--print-value-only",
        "kept",
    )
    assert got.stdout.strip() == "yes"
    events = e2e_cluster.get_json(
        "events", "--field-selector", "involvedObject.name=dr", namespace=e2e_namespace
    )
    assert "QuorumRecoveredFromSurvivor" in [e["reason"] for e in events["items"]]


def operator_pids(namespace: str) -> list[int]:
    """The host operator of this test (the `operator` fixture): it alone watches `namespace`."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if any(b"etcd-supervisor" in a for a in argv) and namespace.encode() in argv:
            pids.append(int(entry.name))
    assert pids, f"no operator process watching {namespace}"
    return pids


@contextmanager
def frozen(pids: list[int]) -> Iterator[None]:
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)

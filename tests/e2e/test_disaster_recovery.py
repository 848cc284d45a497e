"""Quorum-loss recovery on real pods (spec.disasterRecovery.mode: Automatic), the survivor path.

Two of three members lose their volumes (claim and pod deleted) while the operator is down: they
can never come back, so the quorum is lost for good. The operator restarts the surviving
member's pod alone with --force-new-cluster on its own data, deletes the lost members and grows
the cluster back by learners; what was written before the loss is there, and
status.lastRecovery says how. The operator runs as a host process, as in test_members.py.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from supervisor.kube import manifests as m
from tests.e2e.test_backups import etcdctl, event_reasons, on_demand_backup, status
from tests.harness.cluster import Cluster
from tests.harness.formation import etcd_cluster, run_operator, wait_for
from tests.harness.members_on_nodes import IN_POD_LOCAL
from tests.harness.node import ROOT
from tests.harness.objstore import GcsServer


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


GCS_BUCKET = "e2e-recovery"


def test_every_volume_lost_while_the_operator_is_down_is_rebuilt_from_gcs_backup_and_deltas(
    e2e_cluster: Cluster, e2e_namespace: str, operator_image: str, gcs_server: GcsServer, tmp_path: Path
) -> None:
    """All three members' pods and claims deleted while the operator is stopped: the restarted
    operator knows the cluster had members (its status lists them), recalls the newest verified
    backup and the delta chunks from GCS, and rebuilds the cluster from them; every write is back."""
    ns, name = e2e_namespace, "gone"
    gcs_server.create_bucket(GCS_BUCKET)
    cluster = etcd_cluster(name, e2e_cluster.etcd_version, tls=True)
    cluster["spec"]["disasterRecovery"] = {"mode": "Automatic"}
    store = {"gcs": {"bucket": GCS_BUCKET, "prefix": "etcd/", "endpoint": gcs_server.endpoint}}
    cluster["spec"]["backup"] = {"schedule": "0 0 1 1 *", "deltaPeriod": "2s", "store": store}
    work = ROOT / "operator" if e2e_cluster.node else tmp_path
    logs = ROOT / "logs" if e2e_cluster.node else tmp_path

    with run_operator(e2e_cluster, ns, work, logs / f"operator-{ns}-before.log", helper_image=operator_image):
        e2e_cluster.apply([cluster], namespace=ns)
        wait_for(
            f"EtcdCluster {name} Running",
            lambda: status(e2e_cluster, ns, name).get("phase") == "Running",
            180,
        )
        puts = "".join(f"put /app/before-{i} v{i}\n" for i in range(10))
        etcdctl(e2e_cluster, ns, name, tmp_path, "txn", input=f"\n{puts}\n\n")
        e2e_cluster.apply([on_demand_backup("base", name)], namespace=ns)

        def verified() -> dict | None:
            found = e2e_cluster.get_json("etcdbackup", "base", namespace=ns).get("status") or {}
            assert found.get("phase") != "Failed", found
            return found if found.get("phase") == "Succeeded" and found.get("verified") else None

        base = wait_for("the backup to GCS verified in a pod", verified, 120, poll=0.5)
        last = 0
        for i in range(3):  # after the snapshot: only the delta chunks hold these
            out = etcdctl(e2e_cluster, ns, name, tmp_path, "put", f"/app/after-{i}", f"w{i}", "-w", "json")
            last = int(json.loads(out)["header"]["revision"])
        assert last > base["revision"]
        wait_for(
            "the delta chunks in GCS reach the last write",
            lambda: gcs_deltas_reach(gcs_server, ns, name) >= last,
            60,
        )

    for kind in ("pods", "pvc"):
        e2e_cluster.kubectl(
            "delete", kind, "-n", ns, "--selector", f"{m.LABEL_INSTANCE}={name}", "--wait=false",
            *(["--grace-period=0", "--force"] if kind == "pods" else []),
        )  # fmt: skip
    wait_for(
        "every pod and claim of the cluster gone",
        lambda: (
            not e2e_cluster.kubectl(
                "get", "pods,pvc", "-n", ns, "-o", "name", "--selector", f"{m.LABEL_INSTANCE}={name}"
            ).stdout.strip()
        ),
        120,
        poll=1.0,
    )

    start = time.monotonic()
    with run_operator(e2e_cluster, ns, work, logs / f"operator-{ns}-after.log", helper_image=operator_image):

        def recovered() -> dict | None:
            found = status(e2e_cluster, ns, name)
            back = found.get("phase") == "Running" and found.get("readyReplicas") == 3
            return found if back and found.get("lastRecovery") else None

        found = wait_for(
            f"{name} rebuilt from the backup and grown back to 3 members", recovered, 300, poll=1.0
        )
        print(
            f"\nevery volume lost -> rebuilt from GCS, 3 members Running in {time.monotonic() - start:.1f}s"
        )
        print(f"lastRecovery: {found['lastRecovery']}")
        assert found["lastRecovery"]["path"] == "Backup"
        assert int(found["lastRecovery"]["revision"]) >= last  # the deltas replayed, not the snapshot alone
        got = json.loads(etcdctl(e2e_cluster, ns, name, tmp_path, "get", "--prefix", "/app/", "-w", "json"))
        keys = {base64.b64decode(kv["key"]).decode() for kv in got.get("kvs") or []}
        assert keys == {f"/app/before-{i}" for i in range(10)} | {f"/app/after-{i}" for i in range(3)}
        assert "QuorumRecoveredFromBackup" in event_reasons(e2e_cluster, ns, name)


def gcs_deltas_reach(server: GcsServer, namespace: str, name: str) -> int:
    """The last revision of the delta chunks in the bucket (chunk keys end in -FIRST-LAST)."""
    prefix = urllib.parse.quote(f"etcd/{namespace}/{name}/deltas/", safe="")
    with urllib.request.urlopen(
        f"{server.endpoint}/storage/v1/b/{GCS_BUCKET}/o?prefix={prefix}", timeout=10
    ) as r:
        items = json.load(r).get("items") or []
    return max((int(o["name"].rsplit("-", 1)[-1].split(".")[0]) for o in items), default=0)

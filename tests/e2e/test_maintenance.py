"""Maintenance on real pods: a fragmented cluster, with etcd's auth turned on, is defragmented one
member at a time, followers first, the leader last after leadership moved off it (issue 12 once
on real pods, issue 16, and issue 33's auth through the operator)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from supervisor.kube import manifests as m
from tests.harness import images
from tests.harness.cluster import Cluster
from tests.harness.formation import assert_no_member_failed, form_cluster, tls_files, wait_for

MiB = 1 << 20
# The operator logs every step it takes, in order (Events only carry whole seconds).
STEP = re.compile(r": (DefragMember\(name='([^']+)'|MoveLeaderToDefrag\()")


def members_status(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    status = cluster.get_json("etcdcluster", name, namespace=namespace).get("status") or {}
    return list(status.get("members") or [])


def db_sizes(cluster: Cluster, namespace: str, name: str) -> dict[str, int]:
    return {mem["name"]: int(mem.get("dbSize") or 0) for mem in members_status(cluster, namespace, name)}


def leader_of(cluster: Cluster, namespace: str, name: str) -> str:
    members = cluster.get_json("etcdcluster", name, namespace=namespace)["status"]["members"]
    return next(mem["name"] for mem in members if mem.get("role") == "leader")


def test_fragmented_members_are_defragmented_one_at_a_time_the_leader_last(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path, tmp_path: Path
) -> None:
    _, seen = form_cluster(e2e_cluster, e2e_namespace, "frag", tls=True)
    assert_no_member_failed(seen)
    ref = m.ClusterRef(e2e_namespace, "frag")
    endpoint = f"--endpoints=https://{m.client_service_hosts(ref)[-1]}:{m.CLIENT_PORT}"
    etcdctl: list[str | os.PathLike[str]] = [
        images.default_etcd_dir() / "etcdctl",
        endpoint,
        *tls_files(e2e_cluster, e2e_namespace, "frag", tmp_path),
    ]

    def ctl(*args: str, value: str | None = None) -> str:
        cmd = e2e_cluster.host_dns_command([*etcdctl, *args])
        return subprocess.run(cmd, input=value, capture_output=True, text=True, check=True, timeout=60).stdout

    # Auth turned on in the running cluster first, so the operator's steps here (its probes,
    # the leadership move, Defragment) go through as a root user of etcd's (issue 33).
    auth = {"spec": {"security": {"auth": {"enabled": True}}}}
    e2e_cluster.kubectl(
        "patch", "etcdcluster", "frag", "-n", e2e_namespace, "--type=merge", "-p", json.dumps(auth)
    )
    wait_for("etcd's auth on", lambda: "Authentication Status: true" in ctl("auth", "status"), 90, poll=1.0)

    # 24 versions of a 1 MiB value, then all history but the last compacted away: every
    # member's file keeps ~24 MiB of which ~1 MiB is in use.
    for _ in range(24):
        ctl("put", "bloat", value="x" * MiB)
    revision: Any = json.loads(ctl("get", "bloat", "-w", "json"))["header"]["revision"]
    ctl("compact", str(revision), "--physical")
    # bbolt frees the compacted pages for good only at the commit of a write begun after every
    # reader older than the compaction ended (until then they count as in use), and each member
    # compacts on its own time: a live cluster writes on; this one is told to, until every
    # member's status shows most of its file free.
    writes = iter(range(1_000))

    def fragmented_everywhere() -> dict[str, int] | None:
        ctl("put", "after-compaction", str(next(writes)))
        members = members_status(e2e_cluster, e2e_namespace, "frag")
        sizes = {mem["name"]: int(mem.get("dbSize") or 0) for mem in members}
        in_use = [int(mem.get("dbSizeInUse") or 0) for mem in members]
        fragmented = all(v > 16 * MiB for v in sizes.values()) and all(u < 8 * MiB for u in in_use)
        return sizes if members and fragmented else None

    bloated = wait_for("every member's database mostly free in the status", fragmented_everywhere, 60)
    leader = leader_of(e2e_cluster, e2e_namespace, "frag")

    defrag = {"spec": {"maintenance": {"defrag": {"fragmentationRatio": 0.5, "minReclaim": "8Mi"}}}}
    e2e_cluster.kubectl(
        "patch", "etcdcluster", "frag", "-n", e2e_namespace, "--type=merge", "-p", json.dumps(defrag)
    )
    try:
        wait_for(
            "every member's database shrunk to less than half",
            lambda: all(
                size < bloated[name] // 2
                for name, size in db_sizes(e2e_cluster, e2e_namespace, "frag").items()
            ),
            180,
            poll=1.0,
        )
    except TimeoutError:
        status = e2e_cluster.get_json("etcdcluster", "frag", namespace=e2e_namespace)["status"]
        print(f"status: {json.dumps(status, indent=1)}")
        raise

    steps = [(match[1], match[2] or "") for match in STEP.finditer(operator.read_text(errors="replace"))]
    defragmented = [name for step, name in steps if name]
    assert sorted(defragmented) == sorted(bloated), steps  # each member once
    assert defragmented[-1] == leader, steps  # the old leader last ...
    assert [name for _, name in steps][-2:] == ["", leader], steps  # ... right after the move
    events = e2e_cluster.get_json("events", namespace=e2e_namespace)["items"]
    told = [e["message"] for e in events if e.get("reason") == "MemberDefragmented"]
    assert all("bytes reclaimed" in message for message in told), told
    assert {message.split()[1] for message in told} == set(bloated), told  # an Event per member
    assert ctl("get", "bloat", "--print-value-only").strip() == "x" * MiB  # the live data kept

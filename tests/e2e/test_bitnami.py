"""Bitnami's image family on a real node, with an image of Bitnami's layout whose scripts are traps.

Bitnami's own scripts manage membership by themselves (with ETCD_ON_K8S=yes their start-up
removes the learner the supervisor added and re-adds itself as a voter; their preStop removes
the member), so the supervisor must run only the image's etcd binary. The image here
(images.bitnami_archive) has the layout (binaries under /opt/bitnami/etcd/bin, user 1001, a
volume at /bitnami/etcd) and, where Bitnami's entrypoint, run.sh and prestop.sh are, scripts
that print TRAP_LINE and exit 1: a pod that ever ran one fails and leaves the line in its log.

The node's volumes come from the in-tree hostPath provisioner: root's directories, and no
fsGroup applied to them, so uid 1001 can write its data only if the supervisor gives it the
volume first.
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path

import pytest

from supervisor.kube import manifests as m
from tests.e2e.test_backups import BUCKET, on_demand_backup, s3_store, succeeded_backup
from tests.harness import images
from tests.harness.cluster import Cluster
from tests.harness.components import require
from tests.harness.formation import assert_no_member_failed, etcd_cluster, form_cluster, wait_for
from tests.harness.members_on_nodes import IN_POD_LOCAL, at_full_size, live_members
from tests.harness.node import ROOT
from tests.harness.objstore import S3Server
from tests.harness.watch import KubectlWatch

NAME = "bit"
# One line per event of any pod in the namespace: member, warm or otherwise.
POD_LINE = "{.metadata.uid} {.metadata.name} {.status.phase} {.metadata.deletionTimestamp}{'\\n'}"


@pytest.fixture(scope="module")
def bitnami_version(e2e_cluster: Cluster) -> str:
    """The trap image imported on the node; its tag, the spec.version that runs it."""
    if e2e_cluster.node is None:  # an external cluster (E2E_KUBECONFIG): no component is missing
        pytest.skip("the Bitnami-layout image is built and imported on the built-in node only")
    # etcd 3.5, as Bitnami's last images shipped; the tag is the version, without "v".
    bin_dir = require("etcd 3.5", partial(images.built_etcd, "3.5"))
    archive, version = require("bitnami image", lambda: images.bitnami_archive(ROOT / "images", bin_dir))
    e2e_cluster.node.import_image(archive)
    return version


def test_a_bitnami_layout_cluster_forms_scales_and_heals_without_running_its_scripts(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path, bitnami_version: str
) -> None:
    ns = e2e_namespace
    started = time.monotonic()

    with KubectlWatch(e2e_cluster.kubeconfig, ["pods", "-n", ns], POD_LINE) as every_pod:
        seconds, seen = form_cluster(
            e2e_cluster, ns, NAME, tls=True, version=bitnami_version, repository=images.BITNAMI_REPOSITORY
        )
        print(f"\nBitnami-layout EtcdCluster (3 members, TLS): apply -> Running in {seconds:.2f}s")
        assert_no_member_failed(seen)

        for size in (5, 3):
            start = time.monotonic()
            e2e_cluster.kubectl("scale", "-n", ns, f"etcdcluster/{NAME}", f"--replicas={size}")
            at_size = partial(settled, e2e_cluster, ns, size)
            wait_for(f"{NAME} at {size} voting members", at_size, 180, poll=0.5)
            print(f"kubectl scale -> {size}: settled in {time.monotonic() - start:.2f}s")

        old = e2e_cluster.get_json("pod", f"{NAME}-1", namespace=ns)["metadata"]["uid"]
        start = time.monotonic()
        e2e_cluster.kubectl("delete", "pod", "-n", ns, f"{NAME}-1", "--wait=false")

        def healed() -> bool:
            pod = e2e_cluster.kubectl("get", "pod", "-n", ns, f"{NAME}-1", "-o", "json", check=False)
            return (
                not pod.returncode
                and json.loads(pod.stdout)["metadata"]["uid"] != old
                and settled(e2e_cluster, ns, 3)
            )

        wait_for(f"{NAME}-1 replaced and 3 ready voters", healed, 180, poll=0.5)
        print(f"member pod deleted -> 3 ready voters again in {time.monotonic() - start:.2f}s")
        pod_events = every_pod.drain()

    # No pod ever ran a trap: not in any container's log (the previous run's too), not in a
    # member's exit the operator logged before replacing its pod, and no pod failed on its
    # own (a pod deleted by the scale-down, the heal or the operator may turn Failed once its
    # etcd is stopped; it carries a deletionTimestamp by then).
    assert_no_trap_ran(e2e_cluster, ns, operator)
    failed = sorted({f[1] for f in map(str.split, pod_events) if f[2:3] == ["Failed"] and len(f) == 3})
    assert not failed, f"pods failed without being deleted: {failed}"
    # restartPolicy Never: an etcd that exits is a new pod (the check above), never a restart.
    restarts = {
        (p["metadata"]["name"], c["name"]): c["restartCount"]
        for p in e2e_cluster.get_json("pods", namespace=ns)["items"]
        for c in (p.get("status") or {}).get("containerStatuses") or []
        if c["restartCount"]
    }
    assert not restarts, restarts

    for pod in live_members(e2e_cluster, ns, NAME):
        assert_data_is_1001s_on_hostpath(e2e_cluster, ns, pod["metadata"]["name"])
    print(f"whole test on the node: {time.monotonic() - started:.1f}s")


def test_a_bitnami_layout_backup_is_verified_and_restored_onto_a_hostpath_volume(
    e2e_cluster: Cluster, e2e_namespace: str, operator: Path, bitnami_version: str, s3_server: S3Server
) -> None:
    """The short-lived pods on the same image: the verify pod (its etcdutl and etcd as 1001 on
    an emptyDir) and the restore pod, whose etcdutl writes the seed's data dir as 1001 on a
    root's hostPath volume after the same init container as the members'."""
    ns, started = e2e_namespace, time.monotonic()
    s3_server.create_bucket(BUCKET)
    e2e_cluster.kubectl(
        "create", "secret", "generic", "s3-creds", "-n", ns,
        f"--from-literal=AWS_ACCESS_KEY_ID={s3_server.access_key_id}",
        f"--from-literal=AWS_SECRET_ACCESS_KEY={s3_server.secret_access_key}",
    )  # fmt: skip
    source = etcd_cluster("bsrc", bitnami_version, tls=True, repository=images.BITNAMI_REPOSITORY)
    source["spec"] |= {"size": 1, "backup": {"store": s3_store(s3_server)}}
    e2e_cluster.apply([source], namespace=ns)
    wait_for("EtcdCluster bsrc Running", lambda: phase(e2e_cluster, ns, "bsrc") == "Running", 180)
    in_pod(e2e_cluster, ns, "bsrc-0", "put", "kept", "through-a-restore")

    e2e_cluster.apply([on_demand_backup("bbackup", "bsrc")], namespace=ns)

    succeeded = partial(succeeded_backup, e2e_cluster, ns, "bbackup")
    taken = wait_for("the EtcdBackup Succeeded", succeeded, 180, poll=0.5)
    assert taken["verified"] is True, taken

    restored = etcd_cluster("brestored", bitnami_version, tls=True, repository=images.BITNAMI_REPOSITORY)
    restored["spec"] |= {"size": 1, "restore": {"backupName": "bbackup"}}
    e2e_cluster.apply([restored], namespace=ns)
    wait_for("EtcdCluster brestored Running", lambda: phase(e2e_cluster, ns, "brestored") == "Running", 240)
    got = in_pod(e2e_cluster, ns, "brestored-0", "get", "--print-value-only", "kept")
    assert got.strip() == "through-a-restore"
    assert_data_is_1001s_on_hostpath(e2e_cluster, ns, "brestored-0")
    assert_no_trap_ran(e2e_cluster, ns, operator)
    print(f"\nBitnami-layout backup verified and restored in {time.monotonic() - started:.1f}s")


def phase(cluster: Cluster, namespace: str, name: str) -> str | None:
    return (cluster.get_json("etcdcluster", name, namespace=namespace).get("status") or {}).get("phase")


def in_pod(cluster: Cluster, namespace: str, pod: str, *args: str) -> str:
    """etcdctl in the member's own etcd container (the image's, on its PATH)."""
    return cluster.kubectl(
        "exec", "-n", namespace, pod, "-c", "etcd", "--", "etcdctl", *IN_POD_LOCAL, *args
    ).stdout


def assert_data_is_1001s_on_hostpath(cluster: Cluster, namespace: str, pod: str) -> None:
    """The condition the init container is for: the member's claim is a hostPath volume (no
    fsGroup applied), and the volume's root and etcd's data on it are uid 1001's."""
    claim = cluster.get_json("pvc", m.volume_claim_name(pod), namespace=namespace)
    volume = cluster.get_json("pv", claim["spec"]["volumeName"])
    assert "hostPath" in volume["spec"], volume["spec"]
    stat = ["stat", "-c", "%u", "/bitnami/etcd", "/bitnami/etcd/data"]
    owners = cluster.kubectl("exec", "-n", namespace, pod, "-c", "etcd", "--", *stat).stdout.split()
    assert owners == ["1001", "1001"], (pod, owners)


def assert_no_trap_ran(cluster: Cluster, namespace: str, operator_log: Path) -> None:
    """No container of any pod logged a trap line, nor did the operator (it logs a member's
    exit, with its last lines, before it replaces the pod)."""
    trapped = trap_lines(cluster, namespace)
    assert not trapped, trapped
    assert "TRAP:" not in operator_log.read_text(errors="replace")


def settled(cluster: Cluster, namespace: str, size: int) -> bool:
    status = cluster.get_json("etcdcluster", NAME, namespace=namespace).get("status") or {}
    return status.get("phase") == "Running" and at_full_size(cluster, namespace, NAME, size)


def trap_lines(cluster: Cluster, namespace: str) -> list[str]:
    """Every log line of a trap, of any container of any pod in `namespace`, with where it was;
    the run before the last too, for a container that restarted."""
    found = []
    for pod in cluster.get_json("pods", namespace=namespace)["items"]:
        name = pod["metadata"]["name"]
        status = pod.get("status") or {}
        for c in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            runs = [["logs"], ["logs", "--previous"]] if c.get("restartCount") else [["logs"]]
            for run in runs:
                out = cluster.kubectl(*run, "-n", namespace, name, "-c", c["name"], check=False)
                found += [f"{name}/{c['name']}: {ln}" for ln in out.stdout.splitlines() if "TRAP:" in ln]
    return found

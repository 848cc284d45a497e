"""EtcdBackup on a real kube-apiserver: what the CRD admits (CEL naming the field), and the
operator's side (supervisor/kube/backup_requests.py) as the deployed ServiceAccount: the queue
a cluster's backup actor reads, the status subresource and the Events it writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from actors.model import BackupPhase, ClusterRef, EtcdBackupStatus
from supervisor.kube.backup_requests import KubeBackupRequests, backup_path
from supervisor.kube.status import KubeEventSink
from tests.harness.kube import KubeAPIServer
from tests.harness.poll import eventually
from tests.kube.clients import clients

pytestmark = pytest.mark.slow

S3 = {"s3": {"bucket": "backups", "credentialsSecret": "s3-creds"}}


def backup(name: str, spec: dict[str, Any]) -> str:
    obj = {"apiVersion": "etcd.io/v1alpha1", "kind": "EtcdBackup", "metadata": {"name": name}, "spec": spec}
    return json.dumps(obj)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "spec.clusterName is required"),
        ({"clusterName": ""}, "spec.clusterName is required"),
        ({"clusterName": "Demo"}, "spec.clusterName"),
        ({"clusterName": "demo", "store": {**S3, "local": {"path": "/b"}}}, "exactly one store"),
        ({"clusterName": "demo", "store": {}}, "exactly one store"),
    ],
)
def test_the_crd_refuses_bad_backups_naming_the_field(
    kube_crds: KubeAPIServer, kube_namespace: str, spec: dict[str, Any], message: str
) -> None:
    proc = kube_crds.kubectl("create", "-n", kube_namespace, "-f", "-", input=backup("b", spec), check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_a_backup_is_immutable_and_lists_with_its_columns(
    kube_crds: KubeAPIServer, kube_namespace: str
) -> None:
    ns = ["-n", kube_namespace]
    kube_crds.kubectl("create", *ns, "-f", "-", input=backup("b", {"clusterName": "demo", "store": S3}))
    edit = json.dumps({"spec": {"clusterName": "other"}})
    proc = kube_crds.kubectl("patch", "etcdbackup", "b", *ns, "--type=merge", "-p", edit, check=False)
    assert proc.returncode != 0 and "spec is immutable" in proc.stderr, proc.stderr
    status = {"phase": "Succeeded", "key": "k.db", "sizeBytes": 4096, "revision": 12, "verified": True}
    kube_crds.kubectl(
        "patch",
        "etcdbackup",
        "b",
        *ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )
    lines = kube_crds.kubectl("get", "etcdb", *ns).stdout.splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "CLUSTER", "SIZE", "REVISION", "VERIFIED", "AGE"]
    assert lines[1].split()[:6] == ["b", "Succeeded", "demo", "4096", "12", "true"]


async def test_the_operator_queues_backups_oldest_first_and_writes_their_status_and_events(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    demo = ClusterRef(kube_namespace, "demo")
    path = f"/apis/etcd.io/v1alpha1/namespaces/{kube_namespace}/etcdbackups"
    async with clients(kube_crds, operator_kubeconfig) as (op, admin), trio.open_nursery() as nursery:
        requests = KubeBackupRequests(op, KubeEventSink(op), [kube_namespace])
        nursery.start_soon(requests.run)
        for name, cluster in (("first", "demo"), ("other", "else"), ("second", "demo")):
            await admin.create(path, json.loads(backup(name, {"clusterName": cluster})))
            await trio.sleep(1.1)  # creationTimestamp has whole seconds

        async def queue() -> list[str]:
            return [b.name for b in await requests.pending(demo)]

        await eventually(queue, lambda names: names == ["first", "second"], within=30, what="the queue")
        (first, _) = await requests.pending(demo)

        await requests.report(first, EtcdBackupStatus(BackupPhase.RUNNING, start_time=1_700_000_000.0))
        done = EtcdBackupStatus(
            BackupPhase.SUCCEEDED, "ns/demo/on-demand/first.db", 4096, 12, "ab" * 32, True,
            1_700_000_000.0, 1_700_000_005.0, "verified",
        )  # fmt: skip
        await requests.report(first, done)
        assert await queue() == ["second"]  # at once, before the watch shows the new status

        status = (await admin.get(backup_path(kube_namespace, "first")))["status"]
        assert status["phase"] == "Succeeded" and status["verified"] is True and status["revision"] == 12
        assert status["completionTime"] == "2023-11-14T22:13:25Z"
        events = await admin.get(
            f"/api/v1/namespaces/{kube_namespace}/events",
            query={"fieldSelector": "involvedObject.kind=EtcdBackup,involvedObject.name=first"},
        )
        assert [e["reason"] for e in events["items"]] == ["BackupRunning", "BackupSucceeded"]
        assert events["items"][0]["involvedObject"]["uid"] == first.uid

        # A backup deleted while it runs: its status cannot be written, and that is no error.
        (second,) = await requests.pending(demo)
        await admin.delete(backup_path(kube_namespace, "second"))
        await requests.report(second, EtcdBackupStatus(BackupPhase.FAILED, message="gone"))
        nursery.cancel_scope.cancel()


async def test_a_backup_of_a_missing_cluster_waits_for_it_then_fails_naming_it(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    path = f"/apis/etcd.io/v1alpha1/namespaces/{kube_namespace}/etcdbackups"
    clusters = f"/apis/etcd.io/v1alpha1/namespaces/{kube_namespace}/etcdclusters"
    async with clients(kube_crds, operator_kubeconfig) as (op, admin), trio.open_nursery() as nursery:
        requests = KubeBackupRequests(
            op, KubeEventSink(op), [kube_namespace], orphan_after=8.0, sweep_every=0.3
        )
        nursery.start_soon(requests.run)
        for name, cluster in (("ghost", "nowhere"), ("early", "late")):
            await admin.create(path, json.loads(backup(name, {"clusterName": cluster})))

        async def status(name: str) -> dict[str, Any]:
            return (await admin.get(backup_path(kube_namespace, name))).get("status") or {}

        # Both wait, saying for what; one cluster then comes and its backup's wait is over ...
        for name, cluster in (("ghost", "nowhere"), ("early", "late")):
            waiting = f"waiting: no EtcdCluster {cluster} in namespace {kube_namespace} (yet)"
            await eventually(
                lambda n=name: status(n), lambda s, w=waiting: s.get("message") == w, within=30, what=name
            )
        cluster = {"apiVersion": "etcd.io/v1alpha1", "kind": "EtcdCluster", "metadata": {"name": "late"}}
        await admin.create(clusters, {**cluster, "spec": {"size": 3}})
        await eventually(lambda: status("early"), lambda s: not s.get("message"), within=30, what="early")
        # ... the other fails once the grace is over, naming the cluster, with a warning Event.
        failed = await eventually(
            lambda: status("ghost"), lambda s: s.get("phase") == "Failed", within=60, what="ghost failed"
        )
        assert failed["message"] == f"no EtcdCluster nowhere in namespace {kube_namespace}"
        assert (await status("early")).get("phase", "Pending") == "Pending"
        events = await admin.get(
            f"/api/v1/namespaces/{kube_namespace}/events",
            query={"fieldSelector": "involvedObject.kind=EtcdBackup,involvedObject.name=ghost"},
        )
        assert [(e["reason"], e["type"]) for e in events["items"]] == [("BackupFailed", "Warning")]
        nursery.cancel_scope.cancel()

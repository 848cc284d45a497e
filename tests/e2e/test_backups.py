"""Backups on real pods, the operator deployed as a pod (``kubectl apply -k deploy/``).

A cluster with ``spec.backup`` to S3 (moto, bound to the node's gateway so the operator pod
reaches it; its credentials in a Secret the cluster names) takes an on-demand backup (an
EtcdBackup) and a scheduled one; the operator verifies each in a pod on the cluster's own etcd
image (restored, served alone, HashKV compared with the source's); then a new cluster restored
from the on-demand one (spec.restore.backupName) and the delta backups after it
(spec.backup.deltaPeriod), to a revision between later writes (spec.restore.revision), holds
exactly the keys of that revision, and another restored from the scheduled backup's store and
key as it is holds its keys at its revision; the delta chain is verified as written, in a pod too.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from supervisor.kube import manifests as m
from supervisor.kube import snapshot_pods
from tests.e2e.test_operator_pod import deployed_operator  # noqa: F401 (a fixture)
from tests.harness import images
from tests.harness.cluster import Cluster
from tests.harness.components import require
from tests.harness.formation import etcd_cluster, pods, tls_files, wait_for
from tests.harness.node import GATEWAY
from tests.harness.objstore import S3Server, moto_server_binary, open_moto_server

BUCKET = "e2e-backups"
KEYS = {f"/app/key-{i:02d}": f"value-{i}" for i in range(20)}


@pytest.fixture(scope="module")
def pod_reachable_s3(e2e_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto where the operator pod can reach it: the session's one listens on loopback only."""
    require("moto_server", moto_server_binary)
    host = GATEWAY if e2e_cluster.node is not None else "0.0.0.0"
    with open_moto_server(tmp_path_factory.mktemp("moto-e2e"), host=host) as server:
        server.create_bucket(BUCKET)
        yield server


def s3_store(server: S3Server) -> dict[str, Any]:
    return {
        "s3": {
            "bucket": BUCKET,
            "prefix": "etcd/",
            "endpoint": server.endpoint,
            "region": "us-east-1",
            "credentialsSecret": "s3-creds",
        }
    }


def create_s3_secret(cluster: Cluster, namespace: str, s3: S3Server) -> None:
    """The Secret `s3_store` names: moto's credentials."""
    cluster.kubectl(
        "create", "secret", "generic", "s3-creds", "-n", namespace,
        f"--from-literal=AWS_ACCESS_KEY_ID={s3.access_key_id}",
        f"--from-literal=AWS_SECRET_ACCESS_KEY={s3.secret_access_key}",
    )  # fmt: skip


def etcdctl(
    cluster: Cluster, namespace: str, name: str, work: Path, *args: str, input: str | None = None
) -> str:
    """etcdctl from this host through the cluster's client Service; tried three times (a fresh
    Service's first connections can fail), each of the uses here is idempotent."""
    ref = m.ClusterRef(namespace, name)
    client = f"https://{m.client_service_hosts(ref)[-1]}:{m.CLIENT_PORT}"
    cmd = cluster.host_dns_command(
        [
            images.default_etcd_dir() / "etcdctl",
            f"--endpoints={client}",
            *tls_files(cluster, namespace, name, work),
            *args,
        ]
    )
    for attempt in range(3):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, input=input)
        if done.returncode == 0:
            return done.stdout
        print(f"etcdctl {' '.join(args)} (attempt {attempt + 1}): {done.stderr.strip()}")
        time.sleep(1)
    raise AssertionError(f"etcdctl {' '.join(args)} failed: {done.stderr}")


def on_demand_backup(name: str, cluster: str) -> dict[str, Any]:
    return {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdBackup",
        "metadata": {"name": name},
        "spec": {"clusterName": cluster},
    }


def succeeded_backup(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    """The EtcdBackup's status once Succeeded, None before; a Failed one fails the test."""
    found = cluster.get_json("etcdbackup", name, namespace=namespace).get("status") or {}
    assert found.get("phase") != "Failed", found
    return found if found.get("phase") == "Succeeded" else None


def status(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return cluster.get_json("etcdcluster", name, namespace=namespace).get("status") or {}


def event_reasons(cluster: Cluster, namespace: str, name: str) -> list[str]:
    events = cluster.get_json(
        "events", "--field-selector", f"involvedObject.name={name}", namespace=namespace
    )
    return [e["reason"] for e in events["items"]]


def snapshot_pods_left(cluster: Cluster, namespace: str) -> list[str]:
    found = []
    for component in (snapshot_pods.COMPONENT_VERIFY, snapshot_pods.COMPONENT_RESTORE):
        found += [p["metadata"]["name"] for p in pods(cluster, namespace, f"{m.LABEL_COMPONENT}={component}")]
    return found


def test_backups_to_s3_are_verified_in_pods_and_restore_a_new_cluster(
    e2e_cluster: Cluster,
    e2e_namespace: str,
    deployed_operator: None,  # noqa: F811
    pod_reachable_s3: S3Server,
    tmp_path: Path,
) -> None:
    s3, ns = pod_reachable_s3, e2e_namespace
    create_s3_secret(e2e_cluster, ns, s3)
    source = etcd_cluster("src", e2e_cluster.etcd_version, tls=True)
    source["spec"]["backup"] = {"schedule": "* * * * *", "deltaPeriod": "2s", "store": s3_store(s3)}
    e2e_cluster.apply([source], namespace=ns)
    wait_for("EtcdCluster src Running", lambda: status(e2e_cluster, ns, "src").get("phase") == "Running", 180)
    # One transaction (no compares; every put on success).
    puts = "".join(f"put {key} {value}\n" for key, value in KEYS.items())
    etcdctl(e2e_cluster, ns, "src", tmp_path, "txn", input=f"\n{puts}\n\n")
    written = json.loads(etcdctl(e2e_cluster, ns, "src", tmp_path, "get", "/app/", "-w", "json"))
    revision = int(written["header"]["revision"])

    # On demand, at once (the backup actor's next wake-up); the schedule's next minute too.
    start = time.monotonic()
    e2e_cluster.apply([on_demand_backup("before-restore", "src")], namespace=ns)

    succeeded = partial(succeeded_backup, e2e_cluster, ns, "before-restore")
    taken = wait_for("the EtcdBackup Succeeded", succeeded, 120, poll=0.5)
    print(f"\non-demand backup verified in {time.monotonic() - start:.1f}s: {json.dumps(taken)}")
    assert taken["verified"] is True and taken["revision"] >= revision
    row = e2e_cluster.kubectl("get", "etcdbackup", "before-restore", "-n", ns).stdout.splitlines()[1].split()
    assert row[1:6] == ["Succeeded", "src", str(taken["sizeBytes"]), str(taken["revision"]), "true"]

    def verified_backup() -> dict[str, Any] | None:
        last = (status(e2e_cluster, ns, "src").get("backup") or {}).get("lastSuccessfulBackup") or {}
        return (
            last
            if last.get("verified") and last["key"] != taken["key"] and last["revision"] >= revision
            else None
        )

    last = wait_for("a verified scheduled backup", verified_backup, 180, poll=1.0)
    print(f"scheduled backup: {json.dumps(last)}")
    assert last["key"].startswith(f"{ns}/src/") and last["sizeBytes"] > 0
    meta = json.loads(
        s3.boto3_client().get_object(Bucket=BUCKET, Key=f"etcd/{last['key']}.json")["Body"].read()
    )
    assert meta["verified"] is True and meta["sizeBytes"] == last["sizeBytes"]
    assert "BackupSucceeded" in event_reasons(e2e_cluster, ns, "src")
    assert "BackupSucceeded" in event_reasons(e2e_cluster, ns, "before-restore")
    wait_for("the verify pods deleted", lambda: not snapshot_pods_left(e2e_cluster, ns), 60)

    # Delta backups follow the history after the verified backups: writes after them reach the
    # store in chunks, and a restore to a revision between them replays the chunks up to it.
    later = [
        int(
            json.loads(
                etcdctl(e2e_cluster, ns, "src", tmp_path, "put", f"/app/later-{i}", f"v{i}", "-w", "json")
            )["header"]["revision"]
        )
        for i in range(3)
    ]
    chunks = f"etcd/{ns}/src/deltas/"

    def deltas_reach() -> int | None:
        listed = s3.boto3_client().list_objects_v2(Bucket=BUCKET, Prefix=chunks).get("Contents") or []
        reach = max((int(o["Key"].rsplit("-", 1)[-1].split(".")[0]) for o in listed), default=0)
        return reach if reach >= later[-1] else None

    wait_for("the delta chunks reach the later writes", deltas_reach, 120, poll=1.0)
    target = later[1]  # the first two later writes, not the third

    restored = etcd_cluster("restored", e2e_cluster.etcd_version, tls=True)
    restored["spec"]["restore"] = {"backupName": "before-restore", "revision": target}
    # And a restore of the scheduled backup as it is, named by store and key (no deltas): one
    # member is enough, since the restore is the seed's.
    from_key = etcd_cluster("from-key", e2e_cluster.etcd_version, tls=True)
    from_key["spec"] |= {"size": 1, "restore": {"store": s3_store(s3), "key": last["key"]}}
    e2e_cluster.apply([restored, from_key], namespace=ns)
    for name, size in (("restored", 3), ("from-key", 1)):
        wait_for(
            f"EtcdCluster {name} Running with {size} members",
            lambda name=name, size=size: (
                (st := status(e2e_cluster, ns, name)).get("phase") == "Running"
                and st.get("readyReplicas") == size
            ),
            240,
            poll=1.0,
        )
    got = json.loads(etcdctl(e2e_cluster, ns, "from-key", tmp_path, "get", "--prefix", "/app/", "-w", "json"))
    assert {
        base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"]).decode() for kv in got["kvs"]
    } == KEYS
    assert int(got["header"]["revision"]) == last["revision"]
    assert "RestoredFromBackup" in event_reasons(e2e_cluster, ns, "from-key")
    got = json.loads(etcdctl(e2e_cluster, ns, "restored", tmp_path, "get", "--prefix", "/app/", "-w", "json"))
    kvs = {
        base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"]).decode()
        for kv in got.get("kvs") or []
    }
    assert kvs == {**KEYS, "/app/later-0": "v0", "/app/later-1": "v1"}  # exactly the state at `target`
    assert int(got["header"]["revision"]) == target  # the original's revisions
    assert "RestoredFromBackup" in event_reasons(e2e_cluster, ns, "restored")
    # A cluster of its own: none of the source's members is in it.
    src_ids = {
        mem["ID"]
        for mem in json.loads(etcdctl(e2e_cluster, ns, "src", tmp_path, "member", "list", "-w", "json"))[
            "members"
        ]
    }
    new_ids = {
        mem["ID"]
        for mem in json.loads(etcdctl(e2e_cluster, ns, "restored", tmp_path, "member", "list", "-w", "json"))[
            "members"
        ]
    }
    assert not src_ids & new_ids
    # The restore's pods are gone once the restored cluster runs. A verify pod may be there: the
    # source backs up every minute, and this minute's backup may be being verified right now
    # (seen in CI); it must be gone once that is done.
    assert not pods(e2e_cluster, ns, f"{m.LABEL_COMPONENT}={snapshot_pods.COMPONENT_RESTORE}")
    wait_for("the verify pods deleted", lambda: not snapshot_pods_left(e2e_cluster, ns), 60)
    # The delta chain was verified as written: replayed in a delta-verify pod, the source's
    # HashKV matched (the first chunk on each new verified base is verified at once).
    wait_for(
        "a delta chain verified in a pod",
        lambda: "DeltaBackupVerified" in event_reasons(e2e_cluster, ns, "src"),
        120,
        poll=1.0,
    )
    assert "DeltaVerificationFailed" not in event_reasons(e2e_cluster, ns, "src")


SECOND = "e2e-second-site"
TENANT_AUTH = {
    "enabled": True,
    "roles": [{"name": "app-r", "permissions": [{"type": "read", "key": "/app/", "prefix": True}]}],
    "users": [{"name": "app", "roles": ["app-r"], "clientCertSecret": "app-etcd-client"}],
}


def tenant_reach(cluster: Cluster, namespace: str, work: Path) -> bool:
    """Auth is on and the tenant's certificate (from its Secret) reads /app/ and nothing else."""
    data = cluster.get_json("secret", "app-etcd-client", namespace=namespace)["data"]
    (work / "app").mkdir(exist_ok=True)
    flags = []
    for key, flag in (("ca.crt", "cacert"), ("tls.crt", "cert"), ("tls.key", "key")):
        (work / "app" / key).write_bytes(base64.b64decode(data[key]))
        flags.append(f"--{flag}={work / 'app' / key}")
    ref = m.ClusterRef(namespace, "sleepy")
    client = f"https://{m.client_service_hosts(ref)[-1]}:{m.CLIENT_PORT}"

    def tenant(*args: str) -> subprocess.CompletedProcess[str]:
        command = [images.default_etcd_dir() / "etcdctl", f"--endpoints={client}", *flags, *args]
        return subprocess.run(cluster.host_dns_command(command), capture_output=True, text=True, timeout=30)

    reads, outside = tenant("get", "--prefix", "/app/", "--keys-only"), tenant("put", "/other", "x")
    print(f"tenant: get /app/ -> {reads.returncode} {reads.stderr.strip()}; put /other -> {outside.stderr}")
    return reads.returncode == 0 and "permission denied" in outside.stderr


def test_an_encrypted_cluster_hibernates_on_a_final_backup_copied_to_a_second_site_and_wakes_twice(
    e2e_cluster: Cluster,
    e2e_namespace: str,
    deployed_operator: None,  # noqa: F811
    pod_reachable_s3: S3Server,
    tmp_path: Path,
) -> None:
    """Issues 29, 32 and 33 on real pods, with etcd's auth on and a tenant user: backups
    compressed and encrypted by the operator pod, verified in pods and copied to a second bucket
    (verified there by hash); `hibernate: true` takes a final backup and deletes the member pods;
    `false` wakes on the claims, every key and the revision kept; hibernated again with the
    claims deleted, it wakes from the final backup, auth on and the tenant's reach as before."""
    s3, ns = pod_reachable_s3, e2e_namespace
    s3.create_bucket(SECOND)
    create_s3_secret(e2e_cluster, ns, s3)
    key = base64.b64encode(os.urandom(32)).decode()
    e2e_cluster.kubectl("create", "secret", "generic", "backup-key", "-n", ns, f"--from-literal=key={key}")
    second = s3_store(s3)
    second["s3"] = {**second["s3"], "bucket": SECOND}
    cluster = etcd_cluster("sleepy", e2e_cluster.etcd_version, tls=True)
    cluster["spec"]["security"]["auth"] = TENANT_AUTH
    cluster["spec"]["backup"] = {
        "schedule": "0 0 1 1 *",  # only the hibernation's and on-demand backups here
        "encryption": {"keySecret": "backup-key"},
        "store": s3_store(s3),
        "copyTo": {"store": second},
    }
    e2e_cluster.apply([cluster], namespace=ns)

    def phase() -> str:
        return str(status(e2e_cluster, ns, "sleepy").get("phase"))

    def running() -> bool:
        st = status(e2e_cluster, ns, "sleepy")
        return st.get("phase") == "Running" and st.get("readyReplicas") == 3

    def contents() -> tuple[dict[str, str], int]:
        got = json.loads(
            etcdctl(e2e_cluster, ns, "sleepy", tmp_path, "get", "--prefix", "/app/", "-w", "json")
        )
        kvs = {
            base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"]).decode() for kv in got["kvs"]
        }
        return kvs, int(got["header"]["revision"])

    wait_for("EtcdCluster sleepy Running", running, 180)
    wait_for("auth on with the tenant's certificate", lambda: tenant_reach(e2e_cluster, ns, tmp_path), 120)
    puts = "".join(f"put {k} {v}\n" for k, v in KEYS.items())
    etcdctl(e2e_cluster, ns, "sleepy", tmp_path, "txn", input=f"\n{puts}\n\n")
    written = contents()

    def hibernate(value: bool) -> None:
        patch = json.dumps({"spec": {"hibernate": value}})
        e2e_cluster.kubectl("patch", "-n", ns, "etcdcluster/sleepy", "--type=merge", "-p", patch)

    members = f"{m.LABEL_INSTANCE}=sleepy,{m.LABEL_COMPONENT}={m.COMPONENT_MEMBER}"
    hibernate(True)
    wait_for("sleepy Hibernated", lambda: phase() == "Hibernated", 240, poll=1.0)
    wait_for("the member pods gone", lambda: not pods(e2e_cluster, ns, members), 60)
    assert len(e2e_cluster.get_json("pvc", "-l", members, namespace=ns)["items"]) == 3  # the claims kept
    final = (status(e2e_cluster, ns, "sleepy").get("backup") or {}).get("lastSuccessfulBackup") or {}
    assert final.get("verified") is True and final["revision"] >= written[1], final
    # Stored encrypted (no etcd snapshot's bytes in the object), and copied to the second site.
    client = s3.boto3_client()
    meta = json.loads(client.get_object(Bucket=BUCKET, Key=f"etcd/{final['key']}.json")["Body"].read())
    assert meta["encryption"]["keyId"] and meta["compression"] == "zstd", meta
    stored = client.get_object(Bucket=BUCKET, Key=f"etcd/{final['key']}")["Body"].read()
    assert b"/app/key-00" not in stored
    wait_for(
        "the final backup verified in the second bucket",
        lambda: "Contents" in client.list_objects_v2(Bucket=SECOND, Prefix=f"etcd/{final['key']}.json"),
        120,
        poll=1.0,
    )
    assert "BackupCopied" in event_reasons(e2e_cluster, ns, "sleepy")

    hibernate(False)  # wakes on its claims: the same data
    wait_for("sleepy Running after waking on its claims", running, 240, poll=1.0)
    assert contents() == written

    hibernate(True)
    wait_for("sleepy Hibernated again", lambda: phase() == "Hibernated", 240, poll=1.0)
    again = (status(e2e_cluster, ns, "sleepy").get("backup") or {}).get("lastSuccessfulBackup") or {}
    e2e_cluster.kubectl("delete", "pvc", "-n", ns, "-l", members, "--wait=true", timeout=120)
    hibernate(False)  # every claim gone: rebuilt from the final backup, decrypted by the operator
    wait_for("sleepy Running after waking from its backup", running, 300, poll=1.0)
    kvs, revision = contents()
    assert kvs == written[0] and revision == again["revision"], (revision, again)
    assert tenant_reach(e2e_cluster, ns, tmp_path), "auth or the tenant's reach not restored with the data"
    assert "QuorumRecoveredFromBackup" in event_reasons(e2e_cluster, ns, "sleepy")

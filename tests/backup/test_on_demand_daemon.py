"""On-demand backups through the whole local daemon (`etcd-supervisor local FILE`), as a user
drives it: EtcdBackup documents in the manifest, a real S3 server (moto), real etcd, backups
compressed and encrypted with the key in a file next to the manifest.

One daemon run proves the path end to end: the backup's status file goes Succeeded and
verified; a backup of a cluster the file lacks is Failed saying so, disturbing nothing; a new
cluster restored by backupName holds every key, its seed's HashKV checked against the backup's;
a restore naming a backup that did not succeed leaves its cluster Failed with nothing built.
A second daemon on the same state does not take a finished backup again.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import trio

from actors.backup.envelope import is_envelope
from actors.backup.keys import key_id
from supervisor.local.daemon import run_local
from tests.chaos.lifecycle import FAST
from tests.harness.poll import eventually
from tests.harness.procs import kill_all_mentioning

ETCDCTL = Path(sys.executable).parent / "etcdctl"

CLUSTER = """\
apiVersion: etcd.io/v1alpha1
kind: EtcdCluster
metadata: {{name: {name}}}
spec:
  size: {size}
  security: {{tls: {{enabled: false}}}}
{extra}"""

BACKUP = """\
apiVersion: etcd.io/v1alpha1
kind: EtcdBackup
metadata: {{name: {name}}}
spec: {{clusterName: {cluster}}}
"""


def manifest(*documents: str) -> str:
    return "---\n".join(documents)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def etcdctl(endpoints: list[str], *args: str) -> str:
    argv = [str(ETCDCTL), f"--endpoints={','.join(endpoints)}", *args]
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30).stdout


def every_key(endpoints: list[str]) -> dict[str, str]:
    out = json.loads(etcdctl(endpoints, "get", "--prefix", "key-", "-w", "json"))
    decode = base64.b64decode
    return {decode(kv["key"]).decode(): decode(kv["value"]).decode() for kv in out.get("kvs", [])}


class Daemon:
    def __init__(self, tmp_path: Path) -> None:
        self.file = tmp_path / "clusters.yaml"
        self.state = tmp_path / "state"

    def status(self, cluster: str) -> dict | None:
        return read_json(self.state / "default" / cluster / "status.json")

    def backup(self, cluster: str, name: str) -> dict | None:
        return read_json(self.state / "default" / cluster / "backups" / f"{name}.json")

    def events(self, cluster: str) -> list[dict]:
        path = self.state / "default" / cluster / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    async def healthy(self, cluster: str, size: int) -> list[str]:
        status = await eventually(
            lambda: self.status(cluster),
            lambda s: s is not None and s["phase"] == "Running" and s["readyReplicas"] == size,
            within=120,
            what=f"{cluster} Running with {size} ready",
        )
        return [m["clientURL"] for m in status["members"]]

    async def backup_done(self, cluster: str, name: str) -> dict:
        return await eventually(
            lambda: self.backup(cluster, name),
            lambda s: s is not None and s["phase"] in ("Succeeded", "Failed"),
            within=120,
            what=f"EtcdBackup {name} finished",
        )


async def test_on_demand_backup_to_s3_then_restore_by_name_through_the_daemon(tmp_path, s3_server):
    bucket = s3_server.create_bucket("on-demand")
    (tmp_path / "s3-creds").write_text(
        f"AWS_ACCESS_KEY_ID={s3_server.access_key_id}\nAWS_SECRET_ACCESS_KEY={s3_server.secret_access_key}\n"
    )
    # Encrypted, with the key in a file next to the manifest (the daemon's own key source).
    key = os.urandom(32)
    (tmp_path / "backup-key").write_text(f"key={base64.b64encode(key).decode()}\n")
    store = (
        "  backup:\n    encryption: {keySecret: backup-key}\n    store:\n      s3: {"
        f"bucket: {bucket}, endpoint: '{s3_server.endpoint}', region: us-east-1, credentialsSecret: s3-creds"
        "}\n"
    )
    demo = CLUSTER.format(name="demo", size=1, extra=store)
    daemon = Daemon(tmp_path)
    daemon.file.write_text(manifest(demo))
    written = {f"key-{i:03}": f"value-{i}" for i in range(60)}
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: run_local(daemon.file, daemon.state, timing=FAST, show_board=False))
            endpoints = await daemon.healthy("demo", 1)
            for k, v in written.items():
                etcdctl(endpoints, "put", k, v)
            daemon.file.write_text(
                manifest(
                    demo,
                    BACKUP.format(name="first", cluster="demo"),
                    BACKUP.format(name="ghost", cluster="nope"),
                )
            )
            first = await daemon.backup_done("demo", "first")
            ghost = await daemon.backup_done("nope", "ghost")
            assert first["phase"] == "Succeeded" and first["verified"] is True, first
            assert first["key"].startswith("default/demo/on-demand/first-") and first["sizeBytes"] > 0
            assert first["revision"] >= len(written) and len(first["sha256"]) == 64
            assert (
                ghost["phase"] == "Failed" and "no EtcdCluster nope in namespace default" in ghost["message"]
            )
            s3 = s3_server.boto3_client()
            objects = s3.list_objects_v2(Bucket=bucket)["Contents"]
            assert {o["Key"] for o in objects} == {first["key"], first["key"] + ".json"}
            assert is_envelope(
                s3.get_object(Bucket=bucket, Key=first["key"], Range="bytes=0-7")["Body"].read()
            )
            meta = json.loads(s3.get_object(Bucket=bucket, Key=first["key"] + ".json")["Body"].read())
            assert meta["encryption"]["keyId"] == key_id(key).hex() and meta["compression"] == "zstd"
            # Read once, at once: the Event is recorded before the phase that ends the backup.
            reasons = [e["reason"] for e in daemon.events("demo")]
            assert "BackupStarted" in reasons and "BackupSucceeded" in reasons, reasons

            # Restore by name into a new 3-member cluster; and one from a backup that failed.
            # The restored cluster names the key to decrypt with (its own spec.backup.encryption).
            restored = CLUSTER.format(
                name="restored", size=3, extra=store + "  restore: {backupName: first}\n"
            )
            doomed = CLUSTER.format(name="doomed", size=1, extra="  restore: {backupName: ghost}\n")
            backups = [
                BACKUP.format(name="first", cluster="demo"),
                BACKUP.format(name="ghost", cluster="nope"),
            ]
            daemon.file.write_text(manifest(demo, *backups, restored, doomed))
            restored_endpoints = await daemon.healthy("restored", 3)
            assert every_key(restored_endpoints) == written
            verified = [e for e in daemon.events("restored") if e["reason"] == "RestoreVerified"]
            assert (
                verified and f"at revision {first['revision']} equals the backup's" in verified[0]["message"]
            )
            failed = await eventually(
                lambda: daemon.status("doomed"), lambda s: s is not None and s["phase"] == "Failed", within=60
            )
            assert "EtcdBackup ghost is Failed" in failed["message"], failed
            assert not list((daemon.state / "default" / "doomed" / "members").glob("*"))
            assert daemon.status("demo")["phase"] == "Running"  # nothing else disturbed
            nursery.cancel_scope.cancel()

        # A second daemon: "first" is done and stays done; a new backup is taken.
        daemon.file.write_text(
            manifest(
                demo,
                BACKUP.format(name="first", cluster="demo"),
                BACKUP.format(name="second", cluster="demo"),
            )
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: run_local(daemon.file, daemon.state, timing=FAST, show_board=False))
            second = await daemon.backup_done("demo", "second")
            nursery.cancel_scope.cancel()
        assert second["phase"] == "Succeeded", second
        assert daemon.backup("demo", "first") == first  # not taken again (pending ones go first)
        started = [e["message"] for e in daemon.events("demo") if e["reason"] == "BackupStarted"]
        assert len(started) == 2 and "second" in started[1], started
    finally:
        kill_all_mentioning(str(tmp_path))

"""Backup encryption keys on a real kube-apiserver (supervisor/kube/store_credentials.py,
SecretKeys), read as the deployed operator's ServiceAccount: the Secret `keySecret` names, its
`key` the current key and other names older ones; a missing Secret or a bad value named. And
the CRD admits spec.backup.encryption and compression, defaulting compression to zstd."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from actors.backup.keys import key_id
from actors.errors import BackupKeyInvalid, BackupKeyMissing
from actors.model import ClusterRef
from supervisor.kube import manifests as m
from supervisor.kube.store_credentials import SecretKeys
from tests.harness.kube import KubeAPIServer
from tests.kube.clients import clients

pytestmark = pytest.mark.slow


def secret(name: str, values: dict[str, bytes]) -> dict[str, object]:
    data = {k: base64.b64encode(base64.b64encode(v)).decode() for k, v in values.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data}


async def test_the_key_secret_is_read_with_its_rotated_keys_and_problems_named(
    kube_crds: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ref = ClusterRef(kube_namespace, "demo")
    current, old = os.urandom(32), os.urandom(32)
    async with clients(kube_crds, operator_kubeconfig) as (operator, admin):
        secrets = m.core_path(kube_namespace, "secrets")
        keys = SecretKeys(operator)
        with pytest.raises(BackupKeyMissing, match=f"keySecret {kube_namespace}/backup-key"):
            await keys.key_ring(ref, "backup-key")
        await admin.create(secrets, secret("backup-key", {"key": current, "before-rotation": old}))
        ring = await keys.key_ring(ref, "backup-key")
        assert ring.current().id == key_id(current)
        assert ring.by_id(key_id(old), "an old backup").name == "before-rotation"
        await admin.create(secrets, secret("short-key", {"key": os.urandom(16)}))
        with pytest.raises(BackupKeyInvalid, match="'key' is 16 bytes"):
            await keys.key_ring(ref, "short-key")


def test_the_crd_admits_encryption_and_defaults_compression(
    kube_crds: KubeAPIServer, kube_namespace: str
) -> None:
    def cluster(name: str, backup: dict[str, object]) -> str:
        spec = {"backup": {"store": {"local": {"path": "/b"}}, **backup}}
        body = {
            "apiVersion": "etcd.io/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": {"name": name},
            "spec": spec,
        }
        return json.dumps(body)

    ns = ["-n", kube_namespace]
    kube_crds.kubectl("create", *ns, "-f", "-", input=cluster("plain", {}))
    got = json.loads(kube_crds.kubectl("get", "etcdcluster", "plain", *ns, "-o", "json").stdout)
    assert got["spec"]["backup"]["compression"] == "zstd"
    sealed = {"encryption": {"keySecret": "backup-key"}, "compression": "none"}
    kube_crds.kubectl("create", *ns, "-f", "-", input=cluster("sealed", sealed))
    got = json.loads(kube_crds.kubectl("get", "etcdcluster", "sealed", *ns, "-o", "json").stdout)
    assert got["spec"]["backup"]["encryption"] == {"keySecret": "backup-key"}
    for bad, words in (
        ({"encryption": {}}, "keySecret: Required value"),
        ({"compression": "gzip"}, "Unsupported value"),
    ):
        proc = kube_crds.kubectl("create", *ns, "-f", "-", input=cluster("bad", bad), check=False)
        assert proc.returncode != 0 and words in proc.stderr, proc.stderr


def test_the_crd_admits_a_second_site_and_refuses_immutable_where_nothing_locks(
    kube_crds: KubeAPIServer, kube_namespace: str
) -> None:
    def cluster(name: str, backup: dict[str, object]) -> str:
        body = {"apiVersion": "etcd.io/v1alpha1", "kind": "EtcdCluster", "metadata": {"name": name}}
        return json.dumps({**body, "spec": {"backup": backup}})

    ns = ["-n", kube_namespace]
    s3 = {"s3": {"bucket": "locked", "credentialsSecret": "s3-creds"}}
    second = {"s3": {"bucket": "second", "region": "eu-west-1", "credentialsSecret": "dr-creds"}}
    good = {"store": s3, "copyTo": {"store": second}, "immutable": {"days": 7}}
    kube_crds.kubectl("create", *ns, "-f", "-", input=cluster("two-sites", good))
    got = json.loads(kube_crds.kubectl("get", "etcdcluster", "two-sites", *ns, "-o", "json").stdout)
    assert got["spec"]["backup"]["copyTo"] == {"store": second} and got["spec"]["backup"]["immutable"] == {
        "days": 7
    }
    local = {"local": {"path": "/b"}}
    for bad, words in (
        (
            {"store": local, "immutable": {"days": 7}},
            "spec.backup.immutable needs spec.backup.store to be an s3 store",
        ),
        (
            {"store": s3, "copyTo": {"store": {"azure": {"container": "dr"}}}, "immutable": {"days": 7}},
            "spec.backup.immutable needs spec.backup.copyTo.store to be an s3 store",
        ),
        ({"store": s3, "immutable": {"days": 0}}, "immutable.days"),
        ({"store": s3, "copyTo": {}}, "copyTo.store: Required value"),
        (
            {"store": s3, "copyTo": {"store": {**local, **second}}},
            "spec.backup.copyTo.store must name exactly one",
        ),
    ):
        proc = kube_crds.kubectl("create", *ns, "-f", "-", input=cluster("bad", bad), check=False)
        assert proc.returncode != 0 and words in proc.stderr, (words, proc.stderr)

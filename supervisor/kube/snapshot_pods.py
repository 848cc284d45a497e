"""The short-lived pods that handle snapshots on Kubernetes (pure: manifests only).

Both start with the operator's own image receiving the snapshot the operator pushes
(snapshot_transfer.py), then run the cluster's own etcd image, so a backup is proven against
the etcd that will one day restore it:

- verify pod: `etcdutl snapshot restore` into a scratch directory, then one etcd serving it,
  alone (its peer port on loopback, a token of its own): the operator hashes it and deletes it.
- restore pod: `etcdutl snapshot restore` into a new cluster's seed member's volume claim, with
  a cluster token of its own (a new cluster ID), then it exits; the member's pod starts next.

With TLS on, both mount the cluster's member certificate: the receiving container serves the
push over TLS with it, and the verify pod's etcd serves its client port as the members do
(client certificates of the cluster's CA only), so a backup's keys are never readable in the
clear on the pod network.

Neither carries the member labels, so the runtime never takes one for a member. Each is owned
by its EtcdCluster (deleted with it) and has a deadline, so nothing outlives a lost operator.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from actors.model import ClusterRef, ClusterSpec, MemberLaunch
from supervisor.kube import manifests as m
from supervisor.kube.image_layout import etcd_security, image_layout, pod_security, volume_owner
from supervisor.kube.pod_template import merge_snapshot_pod
from supervisor.kube.snapshot_transfer import RECEIVE_PORT

Obj = dict[str, Any]

COMPONENT_VERIFY = "backup-verify"
# The verification of delta backups runs beside a full backup's: a component of its own, so
# that neither deletes the other's pod as a stale one.
COMPONENT_DELTA_VERIFY = "delta-verify"
COMPONENT_RESTORE = "restore"
SCRATCH_DIR = "/scratch"
SNAPSHOT_FILE = f"{SCRATCH_DIR}/snapshot.db"
# A pod the operator lost track of (it crashed, it lost the Lease) ends by itself.
DEADLINE_SECONDS = 3600


def snapshot_pod_labels(ref: ClusterRef, component: str) -> dict[str, str]:
    return {**m.cluster_labels(ref), m.LABEL_COMPONENT: component}


def _binaries(spec: ClusterSpec) -> tuple[str, str]:
    """(etcd, the restore tool) in the cluster's image: etcdutl from 3.5, etcdctl before."""
    layout = image_layout(spec)
    tool = "etcdctl" if spec.version.startswith("3.4") else "etcdutl"
    return layout.binary("etcd"), layout.binary(tool)


def _etcd_image_container(spec: ClusterSpec, container: Obj) -> Obj:
    """`container`, which runs the cluster's etcd image, as the image's own user."""
    return {**container, "securityContext": etcd_security(spec)}


# Where the cluster's CA certificate and member key pair are, with TLS on (m.tls_volume).
TLS_FILES = (f"{m.TLS_DIR}/{m.TLS_CA_CERT}", f"{m.TLS_DIR}/{m.TLS_CERT}", f"{m.TLS_DIR}/{m.TLS_KEY}")


def _mounts(spec: ClusterSpec) -> list[Obj]:
    mounts: list[Obj] = [{"name": "scratch", "mountPath": SCRATCH_DIR}]
    if spec.tls_enabled:
        mounts.append({"name": "tls", "mountPath": m.TLS_DIR, "readOnly": True})
    return mounts


def _receive_container(spec: ClusterSpec, helper_image: str, token: str) -> Obj:
    args = [f"--out={SNAPSHOT_FILE}", f"--port={RECEIVE_PORT}"]
    if spec.tls_enabled:
        _, cert, key = TLS_FILES
        args += [f"--tls-cert={cert}", f"--tls-key={key}"]
    return {
        "name": "receive",
        "image": helper_image,
        "command": ["etcd-supervisor", "--log-format=text", "receive-snapshot"],
        "args": args,
        "env": [{"name": "SNAPSHOT_TOKEN", "value": token}],
        "ports": [{"name": "receive", "containerPort": RECEIVE_PORT, "protocol": "TCP"}],
        "volumeMounts": _mounts(spec),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": m.operator_image_security(),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }


def _restore_container(
    spec: ClusterSpec,
    *,
    name: str,
    data_dir: str,
    member: str,
    initial_cluster: str,
    peer_url: str,
    token: str,
) -> Obj:
    _, tool = _binaries(spec)
    container: Obj = {
        "name": name,
        "image": spec.image,
        "command": [tool, "snapshot", "restore", SNAPSHOT_FILE],
        "args": [
            f"--data-dir={data_dir}",
            f"--name={member}",
            f"--initial-cluster={initial_cluster}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster-token={token}",
        ],
        "volumeMounts": [{"name": "scratch", "mountPath": SCRATCH_DIR}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if tool.endswith("etcdctl"):
        container["env"] = [{"name": "ETCDCTL_API", "value": "3"}]
    return _etcd_image_container(spec, container)


def _pod(owner: m.Owner, name: str, component: str, spec: ClusterSpec, pod_spec: Obj) -> Obj:
    pod_spec = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": DEADLINE_SECONDS,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 5,
        **pod_spec,
    }
    pod_spec["securityContext"] = pod_security(spec)
    if spec.tls_enabled:
        # Readable by the receiving container's user too (it is not root); only this pod's
        # containers, the operator's image and the cluster's etcd image, mount it.
        pod_spec["volumes"] = [*pod_spec["volumes"], m.tls_volume(owner.ref, spec, mode=0o444)]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": owner.ref.namespace,
            "labels": snapshot_pod_labels(owner.ref, component),
            "ownerReferences": [m.owner_reference(owner)],
        },
        "spec": pod_spec,
    }
    # The members' placement and pod settings, so it runs where they run (pod_template.py).
    return merge_snapshot_pod(pod, spec.pod_template)


def verify_pod(
    owner: m.Owner,
    spec: ClusterSpec,
    *,
    name: str,
    helper_image: str,
    token: str,
    component: str = COMPONENT_VERIFY,
) -> Obj:
    """A scratch one-member etcd on the snapshot; its client port is what gets hashed (with TLS
    on, over TLS with a client certificate, as for the members)."""
    etcd, _ = _binaries(spec)
    data_dir, peer = f"{SCRATCH_DIR}/data", f"http://127.0.0.1:{m.PEER_PORT}"
    restore = _restore_container(
        spec,
        name="restore",
        data_dir=data_dir,
        member="scratch",
        initial_cluster=f"scratch={peer}",
        peer_url=peer,
        token="verify",
    )
    scheme = "https" if spec.tls_enabled else "http"
    args = [
        "--name=scratch",
        f"--data-dir={data_dir}",
        f"--listen-peer-urls={peer}",
        f"--listen-client-urls={scheme}://0.0.0.0:{m.CLIENT_PORT}",
        f"--advertise-client-urls={scheme}://localhost:{m.CLIENT_PORT}",
        "--log-level=warn",
    ]
    if spec.tls_enabled:
        ca, cert, key = TLS_FILES
        args += [f"--cert-file={cert}", f"--key-file={key}", f"--trusted-ca-file={ca}", "--client-cert-auth"]
    serve = _etcd_image_container(
        spec,
        {
            "name": "etcd",
            "image": spec.image,
            "command": [etcd],
            "args": args,
            "ports": [{"name": "client", "containerPort": m.CLIENT_PORT, "protocol": "TCP"}],
            "volumeMounts": _mounts(spec),
            "terminationMessagePolicy": "FallbackToLogsOnError",
        },
    )
    pod_spec = {
        "initContainers": [_receive_container(spec, helper_image, token), restore],
        "containers": [serve],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
    }
    return _pod(owner, name, component, spec, pod_spec)


def restore_pod(
    owner: m.Owner, launch: MemberLaunch, *, name: str, helper_image: str, token: str, cluster_token: str
) -> Obj:
    """Lays the snapshot into the seed member's claim, as the member's pod will find it."""
    spec = launch.spec
    layout = image_layout(spec)
    restore = _restore_container(
        spec,
        name="restore",
        data_dir=layout.data_dir,  # where member_pod's etcd looks for it
        member=launch.name,
        initial_cluster=launch.initial_cluster_flag(),
        peer_url=launch.urls.peer_url,
        token=cluster_token,
    )
    restore["volumeMounts"].append({"name": "data", "mountPath": layout.volume_mount})
    # The restore writes the data directory as the image's user, as the member's etcd will
    # read it: on a volume of its own user first (the member pod's init container, image_layout.py).
    owner_container = volume_owner(spec, "data")
    pod_spec = {
        # etcdutl resolves the member's peer URL to check it against --initial-cluster; the
        # member's DNS name exists only once its own pod runs, so here it is this pod.
        "hostAliases": [{"ip": "127.0.0.1", "hostnames": [urlsplit(launch.urls.peer_url).hostname]}],
        "initContainers": [
            _receive_container(spec, helper_image, token),
            *([owner_container] if owner_container else []),
        ],
        "containers": [restore],
        "volumes": [
            {"name": "scratch", "emptyDir": {}},
            {"name": "data", "persistentVolumeClaim": {"claimName": m.volume_claim_name(launch.name)}},
        ],
    }
    return _pod(owner, name, COMPONENT_RESTORE, spec, pod_spec)

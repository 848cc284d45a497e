"""Where each image family keeps etcd, and as which user it runs it (pure: data and manifests).

Both families run the image's own etcd binary with the supervisor's flags; nothing else of an
image is ever run. For Bitnami's that matters: its entrypoint and scripts manage membership
themselves (with ETCD_ON_K8S=yes its start-up removes the learner the supervisor just added and
re-adds itself as a voter; its preStop hook removes its own member on every stop), and the
supervisor must stay the only one that changes membership. So only paths and the user differ:

- official (quay.io/coreos/etcd): binaries in /usr/local/bin, runs as root;
- Bitnami (bitnami/etcd): binaries in /opt/bitnami/etcd/bin, runs as uid 1001, its volume at
  /bitnami/etcd. A volume that ignores fsGroup (hostPath, local-path) is root's, so an init
  container gives the volume's root to uid 1001 first (`volume_owner`): etcd, and a restore's
  etcdutl, then create the data directory themselves, as uid 1001.

Pod security: every container runs without privilege escalation or capabilities, under the
runtime's default seccomp profile. What keeps a pod out of the `restricted` Pod Security
Standard is root: the official image's etcd runs as root (the image's user), and Bitnami's
volume owner is root with CHOWN. A pod template with `runAsNonRoot: true` (`non_root`) takes
both away.
"""

from __future__ import annotations

import copy
from typing import Any

from attrs import frozen

from actors.model import ClusterSpec, ImageFamily

Obj = dict[str, Any]

# The init container that hands the volume to the image's user (see volume_owner).
VOLUME_OWNER_CONTAINER = "volume-owner"


@frozen
class ImageLayout:
    bin_dir: str
    volume_mount: str  # where a member's volume is mounted in the pod
    uid: int | None  # the image's non-root user; None: the image runs etcd as root

    def binary(self, name: str) -> str:
        return f"{self.bin_dir}/{name}"

    @property
    def data_dir(self) -> str:
        # A subdirectory: a fresh filesystem's lost+found must not sit inside etcd's data dir.
        return f"{self.volume_mount}/data"


OFFICIAL = ImageLayout(bin_dir="/usr/local/bin", volume_mount="/var/lib/etcd", uid=None)
BITNAMI = ImageLayout(bin_dir="/opt/bitnami/etcd/bin", volume_mount="/bitnami/etcd", uid=1001)


def image_layout(spec: ClusterSpec) -> ImageLayout:
    return BITNAMI if spec.image_family is ImageFamily.BITNAMI else OFFICIAL


# The user the official image's etcd runs as when the pod template asks that nothing run as
# root (non_root): distroless' "nonroot", as the operator's own image.
NON_ROOT_UID = 65532

# What every container the supervisor makes is allowed, in the pod or the container: the
# `restricted` Pod Security Standard's part that does not depend on the user.
RUNTIME_DEFAULT_SECCOMP: Obj = {"type": "RuntimeDefault"}
NO_PRIVILEGE: Obj = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def non_root(spec: ClusterSpec) -> bool:
    """Whether spec.podTemplate.spec.securityContext says `runAsNonRoot: true`: then nothing of
    the pod runs as root. The official image's etcd runs as NON_ROOT_UID (unless the template
    names a user), and no init container hands a volume over (`volume_owner`): volumes must
    honour fsGroup (most CSI drivers, local PVs, emptyDir) or be writable by the user. With it
    every pod the supervisor makes passes the `restricted` Pod Security Standard."""
    return spec.pod_template.spec.security_context.get("runAsNonRoot") is True


def pod_security(spec: ClusterSpec) -> Obj:
    """The pod's securityContext (a pod template's fields are merged over it): the runtime's
    default seccomp profile always; fsGroup where the image runs as a user of its own, so volumes
    that honour it (most CSI drivers, emptyDir, Secrets: the TLS keys) are readable by it; for
    the official image under `non_root`, NON_ROOT_UID as user and fsGroup."""
    out: Obj = {"seccompProfile": dict(RUNTIME_DEFAULT_SECCOMP)}
    layout = image_layout(spec)
    if layout.uid is not None:
        out["fsGroup"] = layout.uid
    elif non_root(spec):
        out["runAsUser"] = NON_ROOT_UID
        out["fsGroup"] = NON_ROOT_UID
    return out


def etcd_security(spec: ClusterSpec) -> Obj:
    """The securityContext of a container that runs the image's etcd tools: no privilege, and,
    where the image has a user of its own, that user said explicitly (a pod template's runAsUser
    must not turn it into root). The official image's etcd runs as the pod's user: root by
    default (the image's), without a capability (it needs none: ports above 1024, files its own)."""
    layout = image_layout(spec)
    if layout.uid is None:
        return copy.deepcopy(NO_PRIVILEGE)
    return {"runAsUser": layout.uid, "runAsNonRoot": True, **copy.deepcopy(NO_PRIVILEGE)}


def volume_owner(spec: ClusterSpec, volume: str) -> Obj | None:
    """The init container that gives `volume`'s root directory to the image's user; None when
    the image runs as root, or when the pod template says nothing runs as root (`non_root`).

    Root with CAP_CHOWN alone: enough to chown any file, nothing else (no reading or writing
    others' files). Not recursive: everything under the mount is written by the image's user
    (etcd, and a restore's etcdutl, run as it after this container), and root without
    CAP_DAC_READ_SEARCH could not even list etcd's 0700 data directory to recurse into it.
    """
    layout = image_layout(spec)
    if layout.uid is None or non_root(spec):
        return None
    return {
        "name": VOLUME_OWNER_CONTAINER,
        "image": spec.image,
        "command": ["chown", f"{layout.uid}:{layout.uid}", layout.volume_mount],
        "volumeMounts": [{"name": volume, "mountPath": layout.volume_mount}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        # The one container the `restricted` Pod Security Standard refuses (root, CHOWN added):
        # a volume that ignores fsGroup cannot be handed over otherwise.
        "securityContext": {
            "runAsUser": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
        },
        "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"memory": "32Mi"}},
    }

"""Warm member pods: the next member's pod and claim, made while the current member starts.

Staged bootstrap and scale-up start members one after another, and each new pod spends about a
second on the node (volumes, sandbox, network, the first status report) before its etcd runs.
So while member k starts, the runtime already makes the pods the members after it will need
(warm pods): the member's own pod, except that its etcd container runs `start-gate` in front of
etcd (start_gate.py says how), and a first container of the operator's image puts the program in
place. When the cluster actor adds a member and starts it, the runtime adopts the warm claim
and pod (relabels them as the member's) and opens the gate, if the pod was made for exactly that
launch; otherwise it deletes the warm pod and makes the member's as usual.

Warm objects carry the cluster's labels with component `warm-member` and no member label, so
list_members, the pod watch, the Services and the disruption budget never count them. A warm
pod whose member never comes fails when its gate gives up; the runtime sweeps failed or old
warm pods, and warm claims without a pod, whenever it makes sure of the cluster's objects.

Pure: manifests and decisions; runtime.py does the I/O.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from actors.model import ClusterRef, MemberLaunch, member_name, member_ordinal
from actors.pod_template import owned_label
from supervisor.kube import manifests as m
from supervisor.kube.start_gate import GATE_PORT

Obj = dict[str, Any]

COMPONENT_WARM = "warm-member"
LABEL_WARM = "etcd.io/warm-member"  # the member the warm pod or claim was made for
# A digest of the member pod the warm pod stands for (warm_digest): adopted only for that launch.
ANNOTATION_WARM_FOR = "etcd.io/warm-for"
# The first container: its postStart hook copies start-gate into the pod and its process then
# waits to be stopped. Why not an init container: the kubelet starts a pod's containers one after
# another in one pass, each after the postStart hook of the one before, but it starts what comes
# after an init container only once its next look at the node's containers (once a second) sees
# the init container finished. That second fell on the path of about half the bootstraps.
GATE_CONTAINER = "start-gate"
GATE_DIR = "/start-gate"
TOKEN_ENV = "START_TOKEN"
GATE_WITHIN = 300  # seconds a warm pod waits for its member before it fails
# Older than this (the gate has given up by then), or failed: the runtime deletes it.
WARM_MAX_AGE = GATE_WITHIN + 60
# A warm claim whose pod is gone is deleted once this old (its pod is made right after it).
CLAIM_GRACE = 60
# How long a start waits for a warm pod still being set up (scheduled, volumes, sandbox) before
# it makes a fresh pod instead: a node sets a pod up in about a second.
WARM_SETUP = 10.0
# At most this many members are made ahead (a scale-up by more makes the rest as it goes).
AHEAD = 4


def warm_selector(ref: ClusterRef) -> dict[str, str]:
    return {**m.cluster_labels(ref), m.LABEL_COMPONENT: COMPONENT_WARM}


def _warm_labels(ref: ClusterRef, member: str) -> dict[str, str]:
    return {**warm_selector(ref), LABEL_WARM: member}


def adoption_patch(ref: ClusterRef, member: str) -> Obj:
    """The merge patch that makes a warm claim the member's own."""
    return {"metadata": {"labels": {**m.member_labels(ref, member), LABEL_WARM: None}}}


def pod_adoption_patch(ref: ClusterRef, member: str) -> Obj:
    """The merge patch that makes a warm pod the member's own: the peer record is set too, as
    a warm pod an earlier operator made has none."""
    patch = adoption_patch(ref, member)
    patch["metadata"]["labels"][m.LABEL_PEER_RECORD] = "true"
    return patch


def is_warm(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(m.LABEL_COMPONENT) == COMPONENT_WARM


def next_launch(launch: MemberLaunch, *, cluster_domain: str) -> MemberLaunch | None:
    """The launch the member after `launch` will most likely get, if the cluster is still growing:
    the next ordinal (the planner names new members one past the highest), joining the members
    `launch` starts among, itself included. None for a restart or once the size is reached."""
    cluster = launch.cluster
    members = [name for name, _ in launch.initial_cluster]
    # Only our own members count towards the size: an adopted cluster's old members (spec.adopt)
    # are in the initial cluster too, named as their owner named them, and stay until ours vote.
    ordinals = [o for o in (member_ordinal(cluster, name) for name in members) if o is not None]
    if launch.name not in members or launch.force_new_cluster or len(ordinals) >= launch.spec.size:
        return None
    if not ordinals:
        return None
    name = member_name(cluster, max(ordinals) + 1)
    urls = m.member_urls(cluster, name, tls=launch.spec.tls_enabled, cluster_domain=cluster_domain)
    # Sorted by name, as the planners list it (actors/plan/common.py initial_cluster).
    joining = tuple(sorted((*launch.initial_cluster, (name, urls.peer_url))))
    return MemberLaunch(cluster, name, urls, joining, "existing", launch.spec)


def upcoming_launches(launch: MemberLaunch, *, cluster_domain: str) -> list[MemberLaunch]:
    """The launches of the members after `launch` until the size is reached (at most AHEAD)."""
    found: list[MemberLaunch] = []
    ahead = next_launch(launch, cluster_domain=cluster_domain)
    while ahead is not None and len(found) < AHEAD:
        found.append(ahead)
        ahead = next_launch(ahead, cluster_domain=cluster_domain)
    return found


def member_pod_digest(pod: Mapping[str, Any]) -> str:
    """What makes two member pods the same pod: spec and annotations (not labels)."""
    shape = {"spec": pod["spec"], "annotations": pod["metadata"].get("annotations") or {}}
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:32]


def warm_claim(owner: m.Owner, launch: MemberLaunch) -> Obj:
    claim = m.member_volume_claim(owner, launch.spec, launch.name, launch.urls)
    claim["metadata"]["labels"] = _warm_labels(owner.ref, launch.name)
    return claim


def warm_pod(owner: m.Owner, member_pod: Obj, *, helper_image: str, token: str) -> Obj:
    """`member_pod` (manifests.member_pod for the predicted launch) with its etcd behind a gate.

    Everything else is the member pod's, its init containers too (Bitnami's volume owner,
    image_layout.py): they run while the pod waits, so the volume is the image user's by the
    time the gate opens, as in a member pod made without warming."""
    name = member_pod["metadata"]["name"]
    pod = copy.deepcopy(member_pod)
    # The user's labels (spec.podTemplate) stay: adoption only relabels the supervisor's own.
    users = {k: v for k, v in member_pod["metadata"]["labels"].items() if not owned_label(k)}
    # The peer record: the member's name resolves to this pod before the member is added
    # (manifests.peer_service says why).
    pod["metadata"]["labels"] = {**users, **_warm_labels(owner.ref, name), m.LABEL_PEER_RECORD: "true"}
    pod["metadata"]["annotations"][ANNOTATION_WARM_FOR] = member_pod_digest(member_pod)
    spec = pod["spec"]
    # kubectl exec and logs go to etcd, not to the first container, unless told otherwise.
    pod["metadata"]["annotations"][m.ANNOTATION_DEFAULT_CONTAINER] = "etcd"
    spec["volumes"] = [*spec["volumes"], {"name": "start-gate", "emptyDir": {}}]
    mount = {"name": "start-gate", "mountPath": GATE_DIR, "readOnly": True}
    spec["containers"] = [_gate_container(helper_image), *spec["containers"]]
    etcd = _etcd(pod)
    gate = [f"{GATE_DIR}/start-gate", f"--port={GATE_PORT}", f"--within={GATE_WITHIN}s", "--"]
    etcd["command"] = [*gate, *etcd["command"]]
    etcd["env"] = [*etcd.get("env", []), {"name": TOKEN_ENV, "value": token}]
    etcd["volumeMounts"] = [*etcd["volumeMounts"], mount]
    return pod


def _etcd(pod: Mapping[str, Any]) -> Obj:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "etcd")


def _gate_container(helper_image: str) -> Obj:
    # The program copies itself (no interpreter to start on this path), and then idles: a
    # container that exits would leave a pod that restarts nothing never Ready.
    copy = ["start-gate", f"--copy-to={GATE_DIR}/start-gate"]
    return {
        "name": GATE_CONTAINER,
        "image": helper_image,
        "command": ["start-gate", "--hold"],
        "lifecycle": {"postStart": {"exec": {"command": copy}}},
        "volumeMounts": [{"name": "start-gate", "mountPath": GATE_DIR}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": m.operator_image_security(),
        "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"memory": "32Mi"}},
    }


def gate_of(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(pod IP, token) of a warm pod that has its address; None before (or once it is going).

    Its gate may not listen yet: the caller connects until it does, rather than wait for the
    kubelet to report the container running (up to a second after it is)."""
    status = pod.get("status") or {}
    ip = status.get("podIP")
    env = _etcd(pod).get("env") or []
    token = next((e.get("value") for e in env if e.get("name") == TOKEN_ENV), None)
    gone = m.etcd_finished(pod) or (pod.get("metadata") or {}).get("deletionTimestamp")
    if not (ip and token) or gone:
        return None
    return str(ip), str(token)


def made_for(pod: Mapping[str, Any], member_pod: Obj) -> bool:
    """Whether the warm `pod` was made for exactly the member pod the launch needs now."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(ANNOTATION_WARM_FOR) == member_pod_digest(member_pod)


def sweep(
    pods: list[Obj], claims: list[Obj], *, age_of: Callable[[Mapping[str, Any]], float]
) -> tuple[list[str], list[str]]:
    """(warm pods, warm claims) to delete, by name: pods that failed or outlived their gate,
    claims whose pod is gone (or going) once past their grace. `age_of(obj)` -> seconds."""
    doomed_pods = [p["metadata"]["name"] for p in pods if m.etcd_finished(p) or age_of(p) > WARM_MAX_AGE]
    living = {p["metadata"]["name"] for p in pods} - set(doomed_pods)
    doomed_claims = [
        c["metadata"]["name"]
        for c in claims
        if c["metadata"]["labels"].get(LABEL_WARM) not in living and age_of(c) > CLAIM_GRACE
    ]
    return doomed_pods, doomed_claims

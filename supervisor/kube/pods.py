"""What a member's pod and claim say, read without I/O: where its process stands, why it
exited, how many times in a row it failed, which cluster and member they belong to.

The crash count rides on the pod (ANNOTATION_FAILURES): pods run with restartPolicy Never,
so each crash is a new pod, made with the count its predecessor's exit implies."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from actors.model import ClusterRef, MemberUrls, ProcessState, StorageSpec
from supervisor.kube import manifests as m

Obj = dict[str, Any]

# A member that ran at least this long before it exited counts as having run healthily:
# its crash starts a new count instead of extending a crash loop.
HEALTHY_RUN_SECONDS = 300.0
# Container runtimes report a process killed by signal N as exit code 128 + N (OOMKilled is
# 137). Such a kill is not the member failing by itself and leaves its crash count alone.
KILLED_BY_SIGNAL = 128


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def is_ready(pod: Mapping[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def pod_state(pod: Mapping[str, Any] | None) -> ProcessState:
    """Pod phase and readiness -> where the member's process stands."""
    if pod is None:
        return ProcessState.ABSENT
    if meta(pod).get("deletionTimestamp"):
        return ProcessState.EXITED  # stopping; its data stays
    if m.etcd_finished(pod):
        return ProcessState.EXITED
    phase = (pod.get("status") or {}).get("phase", "Pending")
    if phase == "Running" and is_ready(pod):
        return ProcessState.RUNNING
    return ProcessState.STARTING


# How long past its deletion deadline (the request plus the grace period) a pod may take to go
# before its node counts as lost: a kubelet that answers confirms within a few seconds.
STOP_OVERDUE_SECONDS = 15.0


def stop_overdue(pod: Mapping[str, Any] | None, now: dt.datetime) -> bool:
    """Whether the pod's deletion is overdue: asked to stop, and its kubelet has not confirmed
    it STOP_OVERDUE_SECONDS after the grace period ended (the node is down or cut off)."""
    deadline = parse_time(meta(pod).get("deletionTimestamp")) if pod is not None else None
    return deadline is not None and (now - deadline).total_seconds() > STOP_OVERDUE_SECONDS


# How long a pod may sit on the node it was given without an address (its sandbox made) before
# the node counts as not acting on it. Generous: attaching a cloud disk can take a minute or two.
NEVER_STARTED_SECONDS = 120.0


def never_started(pod: Mapping[str, Any] | None, now: dt.datetime) -> bool:
    """Whether the pod was given to a node NEVER_STARTED_SECONDS ago and has no address yet: a
    kubelet that runs would have set its sandbox up (or reported why not) long before."""
    if pod is None or not (pod.get("spec") or {}).get("nodeName") or (pod.get("status") or {}).get("podIP"):
        return False
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            placed = parse_time(cond.get("lastTransitionTime"))
            return placed is not None and (now - placed).total_seconds() > NEVER_STARTED_SECONDS
    return False


def stranded(pod: Mapping[str, Any] | None, now: dt.datetime) -> bool:
    """Whether the pod's node does not act on it: its stop overdue, or it never started."""
    return stop_overdue(pod, now) or never_started(pod, now)


def being_deleted(*objects: Obj | None) -> bool:
    """Every object the member still has is on its way out (its deletion is requested)."""
    present = [o for o in objects if o is not None]
    return bool(present) and all(meta(o).get("deletionTimestamp") for o in present)


def pod_exit_code(pod: Mapping[str, Any] | None) -> int | None:
    if pod is None:
        return None
    terminated = m.etcd_state(pod, "terminated")
    code = terminated.get("exitCode")
    return int(code) if code is not None else None


# Why a container is waiting when it cannot start at all: no attempt will get further until
# the spec changes (the image's tag, say). Other waiting reasons (ContainerCreating) pass.
START_FAILURES = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)


def start_failure(pod: Mapping[str, Any] | None) -> str:
    """Why the etcd container cannot start ("ImagePullBackOff: ..."); "" when nothing stops it."""
    if pod is None:
        return ""
    waiting = m.etcd_state(pod, "waiting")
    reason = str(waiting.get("reason") or "")
    if reason not in START_FAILURES:
        return ""
    message = str(waiting.get("message") or "").strip()
    return (f"{reason}: {message}" if message else reason)[:300]


def unschedulable(pod: Mapping[str, Any] | None) -> str:
    """The scheduler's message on a pod it could not place (PodScheduled False, reason
    Unschedulable: "0/3 nodes are available: 3 node(s) didn't match ..."); "" otherwise."""
    if pod is None or (pod.get("spec") or {}).get("nodeName"):
        return ""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (cond.get("type"), cond.get("status"), cond.get("reason")) == (
            "PodScheduled",
            "False",
            "Unschedulable",
        ):
            return (str(cond.get("message") or "").strip() or "Unschedulable")[:300]
    return ""


def pod_last_error(pod: Mapping[str, Any] | None) -> str:
    """The etcd container's termination message (with FallbackToLogsOnError, the log's tail),
    or why it cannot start at all."""
    if pod is None:
        return ""
    if failure := start_failure(pod):
        return failure
    terminated = m.etcd_state(pod, "terminated")
    lines = [line for line in str(terminated.get("message") or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else str(terminated.get("reason") or "")


def pod_exit_tail(pod: Mapping[str, Any]) -> str:
    """The whole termination message of the etcd container (the log's tail, at most the
    kubelet's 2 KiB), indented for a log line; "" when it left none."""
    message = str(m.etcd_state(pod, "terminated").get("message") or "").strip()
    return "".join(f"\n    {line}" for line in message.splitlines() if line.strip())


def claim_volume(claim: Mapping[str, Any] | None) -> StorageSpec | None:
    """The size and class a claim asked for (None without a claim, or one that names no size)."""
    spec = (claim or {}).get("spec") or {}
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if claim is None or not isinstance(size, str):
        return None
    storage_class = spec.get("storageClassName")
    return StorageSpec(
        size=size, storage_class_name=storage_class if isinstance(storage_class, str) else None
    )


def claim_has_data(claim: Mapping[str, Any] | None) -> bool:
    """A claim exists (bound or still waiting for a volume), is not going away, and is not
    marked as a restore's target: a restore cut short (the operator died) left no usable data."""
    if claim is None or meta(claim).get("deletionTimestamp"):
        return False
    return m.ANNOTATION_RESTORING not in (meta(claim).get("annotations") or {})


def pod_failures(pod: Mapping[str, Any] | None) -> int:
    if pod is None:
        return 0
    try:
        return int((meta(pod).get("annotations") or {}).get(m.ANNOTATION_FAILURES, "0"))
    except ValueError:
        return 0


def failures_after(old_pod: Mapping[str, Any]) -> int:
    """The crash count for the pod that replaces `old_pod` (which has finished)."""
    terminated = m.etcd_state(old_pod, "terminated")
    if (old_pod.get("status") or {}).get("phase") == "Succeeded" or terminated.get("exitCode") == 0:
        return 0  # a clean exit is no failure
    if int(terminated.get("exitCode") or 0) > KILLED_BY_SIGNAL:
        return pod_failures(old_pod)
    started, finished = parse_time(terminated.get("startedAt")), parse_time(terminated.get("finishedAt"))
    if started and finished and (finished - started).total_seconds() >= HEALTHY_RUN_SECONDS:
        return 1
    return pod_failures(old_pod) + 1


def consecutive_failures(pod: Mapping[str, Any] | None) -> int:
    """Exits since the member last ran healthily, as its current pod tells."""
    if pod is None:
        return 0
    if m.etcd_finished(pod):
        return failures_after(pod)
    if pod_state(pod) is ProcessState.RUNNING:
        return 0
    if start_failure(pod):
        # A pod that cannot start its container (an image that cannot be pulled) has failed
        # as surely as one that exited: a rollout to that image stops and says why.
        return max(1, pod_failures(pod))
    return pod_failures(pod)


def urls_from(obj: Mapping[str, Any] | None) -> MemberUrls | None:
    annotations = meta(obj).get("annotations") or {} if obj else {}
    peer, client = annotations.get(m.ANNOTATION_PEER_URL), annotations.get(m.ANNOTATION_CLIENT_URL)
    return MemberUrls(peer_url=peer, client_url=client) if peer and client else None


def member_ref(obj: Mapping[str, Any]) -> tuple[ClusterRef, str] | None:
    """Which cluster and member a pod or claim of ours belongs to, from its labels."""
    md = meta(obj)
    labels = md.get("labels") or {}
    instance, member = labels.get(m.LABEL_INSTANCE), labels.get(m.LABEL_MEMBER)
    if not instance or not member or labels.get(m.LABEL_MANAGED_BY) != m.MANAGED_BY:
        return None
    return ClusterRef(namespace=str(md.get("namespace", "")), name=str(instance)), str(member)

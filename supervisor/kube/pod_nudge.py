"""Nudging a new pod that the kubelet has set aside.

The kubelet tries a pod whose sync failed again only after a back-off of about 10 s. A new
member pod's first sync can fail on something that is fine a moment later: its claim read
between the two writes that bind it (the volume named, the phase not yet Bound: "PVC is not
bound"; seen in about one bootstrap in twenty on the built-in node). A bootstrap or a heal
would wait those 10 s. Any update of the pod makes the kubelet sync it again at once, so a
new pod that is on its node but has no address NUDGE_AFTER seconds later gets an annotation
written, every NUDGE_AFTER seconds, at most NUDGES times. A pod that is only slow loses
nothing by it: the kubelet syncs it once more. Member pods (runtime.py) and snapshot pods
(snapshots.py: a restore's pod mounts the seed's new claim) are watched alike.

`settled`, `set_aside` and `nudge_patch` decide, pure; `nudge_while_set_aside` reads and writes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import trio

from supervisor.kube.client import KubeClient, KubeError

log = logging.getLogger(__name__)

NUDGE_AFTER = 2.0  # seconds
NUDGES = 4  # past the kubelet's own retry, which comes about 10 s after the failed sync
ANNOTATION_NUDGED = "etcd.io/nudged"  # how many times; read by nobody, written to wake the kubelet


def settled(pod: Mapping[str, Any] | None, uid: str) -> bool:
    """Nothing more to nudge: the pod is gone, replaced, going away, or has its address."""
    if pod is None:
        return True
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    return meta.get("uid") != uid or bool(meta.get("deletionTimestamp")) or bool(status.get("podIP"))


def set_aside(pod: Mapping[str, Any]) -> bool:
    """On its node, not going away, and still without an address: the kubelet has not set its
    sandbox up, or has not said so yet."""
    meta, spec, status = (pod.get(k) or {} for k in ("metadata", "spec", "status"))
    return bool(spec.get("nodeName")) and not meta.get("deletionTimestamp") and not status.get("podIP")


def nudge_patch(count: int) -> dict[str, Any]:
    return {"metadata": {"annotations": {ANNOTATION_NUDGED: str(count)}}}


async def nudge_while_set_aside(
    client: KubeClient, path: str, uid: str, *, every: float = NUDGE_AFTER
) -> None:
    """Wake the kubelet for the new pod at `path` (with `uid`) while it may have set it aside."""
    for count in range(1, NUDGES + 1):
        await trio.sleep(every)
        try:
            pod = await client.get_or_none(path)
            if settled(pod, uid):
                return
            assert pod is not None
            if set_aside(pod):  # else not scheduled yet: the scheduler's to retry
                await client.merge_patch(path, nudge_patch(count))
                log.info("nudged %s: on its node for %.0f s without an address", path, count * every)
        except KubeError as exc:  # a head start only: the kubelet retries by itself
            log.info("%s not nudged: %s", path, exc)
            return

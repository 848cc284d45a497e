"""Nudging a new pod that the kubelet has set aside.

The kubelet tries a pod whose sync failed again only after a back-off of about 10 s. A new
member pod's first sync can fail on something that is fine a moment later: its claim read
between the two writes that bind it (the volume named, the phase not yet Bound: "PVC is not
bound"; seen in about one bootstrap in twenty on the built-in node). A bootstrap or a heal
would wait those 10 s. Any update of the pod makes the kubelet sync it again at once, so a
new pod that is on its node but has no address NUDGE_AFTER seconds later gets an annotation
written, every NUDGE_AFTER seconds, at most NUDGES times. A pod that is only slow loses
nothing by it: the kubelet syncs it once more. Member pods are watched by
`nudge_while_set_aside` (hosted by runtime.py); snapshot pods are nudged by the loop that
polls them anyway (snapshots.py: a restore's pod mounts the seed's new claim).

`settled`, `set_aside`, `nudge_patch` and `NudgeSchedule` decide, pure; `nudge_if_due` and
`nudge_while_set_aside` read and write.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import attrs
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


@attrs.define
class NudgeSchedule:
    """When a new pod made at `made_at` is due its next nudge: `every` seconds after it was
    made, and every `every` seconds after that, while it is set aside; NUDGES times at most."""

    made_at: float
    every: float = NUDGE_AFTER
    count: int = 0  # nudges written so far

    def due(self, pod: Mapping[str, Any], now: float) -> bool:
        waited = now - self.made_at
        return self.count < NUDGES and set_aside(pod) and waited >= (self.count + 1) * self.every


async def nudge_if_due(
    client: KubeClient, path: str, pod: Mapping[str, Any], schedule: NudgeSchedule
) -> None:
    """Nudge the pod at `path` when its schedule says so. A refused write loses only a head
    start: the kubelet retries by itself."""
    now = trio.current_time()
    if not schedule.due(pod, now):
        return
    schedule.count += 1
    try:
        await client.merge_patch(path, nudge_patch(schedule.count))
    except KubeError as exc:
        log.info("%s not nudged: %s", path, exc)
        return
    log.info("nudged %s: on its node for %.0f s without an address", path, now - schedule.made_at)


async def nudge_while_set_aside(
    client: KubeClient, path: str, uid: str, *, every: float = NUDGE_AFTER
) -> None:
    """Watch the new pod at `path` (with `uid`), nudging it while it is set aside; for a pod
    nobody else polls (member pods: KubeRuntime.run() hosts this). Pollers call nudge_if_due."""
    schedule = NudgeSchedule(trio.current_time(), every)
    # NUDGES looks as well as NUDGES writes: a pod no node has taken yet is never due a nudge,
    # and the loop must still end.
    for _ in range(NUDGES):
        await trio.sleep(every)
        try:
            pod = await client.get_or_none(path)
        except KubeError as exc:
            log.info("%s not looked at for a nudge: %s", path, exc)
            return
        if settled(pod, uid):
            return
        assert pod is not None
        await nudge_if_due(client, path, pod, schedule)

"""The operator's finalizer on an EtcdCluster: added before anything of the cluster is made,
released once its members' volumes are dealt with per the reclaim policy (delete_cluster).

Both are compare-and-swap writes carrying the resourceVersion read: the cluster actor writes
the status beside the very step that adds the finalizer, and a user may edit the object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.model import ClusterRef
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError, is_conflict, is_not_found
from supervisor.kube.pods import meta

Obj = dict[str, Any]

# Compare-and-swap writes of the EtcdCluster's finalizers: tries before giving up.
CONFLICT_ATTEMPTS = 10


class ClusterGone(Exception):
    """The EtcdCluster does not exist (any more), or is being deleted: nothing may be added."""


async def add_finalizer(client: KubeClient, ref: ClusterRef, obj: Obj) -> None:
    """Hold the EtcdCluster (`obj`, as last read) until its volumes are dealt with; ClusterGone
    if it is gone or being deleted."""

    def adding(current: Obj | None) -> list[str] | None:
        if current is None:
            raise ClusterGone(f"EtcdCluster {ref} not found")
        if meta(current).get("deletionTimestamp"):
            raise ClusterGone(f"EtcdCluster {ref} is being deleted")
        finalizers = list(meta(current).get("finalizers") or [])
        return None if m.FINALIZER in finalizers else [*finalizers, m.FINALIZER]

    await _swap_finalizers(client, ref, obj, adding, "add")


async def release_finalizer(client: KubeClient, ref: ClusterRef) -> None:
    """Let the EtcdCluster go; nothing to do when it is gone already."""

    def removing(current: Obj | None) -> list[str] | None:
        finalizers = list(meta(current).get("finalizers") or []) if current else []
        if m.FINALIZER not in finalizers:
            return None
        finalizers.remove(m.FINALIZER)
        return finalizers

    try:
        obj = await client.get_or_none(m.cluster_path(ref))
        await _swap_finalizers(client, ref, obj, removing, "release")
    except KubeError as exc:
        if not is_not_found(exc):  # gone between the read and the patch: released with it
            raise


async def _swap_finalizers(
    client: KubeClient,
    ref: ClusterRef,
    obj: Obj | None,
    change: Callable[[Obj | None], list[str] | None],
    doing: str,
) -> None:
    """Set the EtcdCluster's finalizers to change(obj)'s (None: nothing to do). The
    resourceVersion makes the patch a compare-and-swap: any write in between (the status,
    written beside the very step that adds ours; a user's edit) answers 409 Conflict, and
    the object is read again (None once it is gone)."""
    path = m.cluster_path(ref)
    for _ in range(CONFLICT_ATTEMPTS):
        finalizers = change(obj)
        if finalizers is None:
            return
        assert obj is not None  # change() has nothing to do on a gone object
        version = meta(obj).get("resourceVersion")
        try:
            await client.merge_patch(
                path, {"metadata": {"finalizers": finalizers or None, "resourceVersion": version}}
            )
            return
        except KubeError as exc:
            if not is_conflict(exc):
                raise
        obj = await client.get_or_none(path)
    raise KubeError(409, "Conflict", f"could not {doing} the finalizer of {ref}: too many conflicts")

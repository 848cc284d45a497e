"""StatusSink and EventSink on Kubernetes: the status subresource, and core/v1 Events.

Status writes are optimistic: the object's resourceVersion rides along, so a write based on a
stale read answers 409 Conflict instead of overwriting someone else's newer status; the sink
then reads again and re-applies (the status it holds is the newest truth, the read only
supplies a fresh resourceVersion). The last object written is cached per cluster, so the
common case is one request per publish.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import attrs
from attrs import frozen

from actors.assess import carry_transition_times
from actors.codec import conditions_from_dicts, status_to_dict
from actors.measurements import Measurement
from actors.model import API_GROUP, API_VERSION, KIND, ClusterRef, ClusterStatus
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError, is_conflict, is_namespace_terminating, is_not_found

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def _stamp(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@frozen
class StatusStatistics:
    writes: int
    conflicts: int  # 409 answers, each followed by a re-read and a re-apply


class KubeStatusSink:
    """actors.ports.StatusSink: EtcdCluster status through the status subresource."""

    def __init__(
        self, client: KubeClient, *, max_attempts: int = 5, now: Callable[[], float] = time.time
    ) -> None:
        self._client = client
        self._max_attempts = max_attempts
        self._now = now
        self._last: dict[ClusterRef, Obj] = {}
        self._writes = self._conflicts = 0

    def statistics(self) -> StatusStatistics:
        return StatusStatistics(writes=self._writes, conflicts=self._conflicts)

    async def publish(self, cluster: ClusterRef, status: ClusterStatus) -> None:
        path = m.cluster_path(cluster)
        obj = self._last.get(cluster)
        for _ in range(self._max_attempts):
            if obj is None:
                obj = await self._client.get_or_none(path)
                if obj is None:
                    log.info("status of %s not written: the EtcdCluster is gone", cluster)
                    return
            # The stored conditions outlive the operator: their transition times win.
            stored = conditions_from_dicts((obj.get("status") or {}).get("conditions") or [])
            conditions = carry_transition_times(status.conditions, stored, self._now())
            body = {**obj, "status": status_to_dict(attrs.evolve(status, conditions=conditions))}
            try:
                self._last[cluster] = await self._client.replace(f"{path}/status", body)
                self._writes += 1
                return
            except KubeError as exc:
                self._last.pop(cluster, None)
                if is_not_found(exc):
                    log.info("status of %s not written: the EtcdCluster is gone", cluster)
                    return
                if not is_conflict(exc):
                    raise
                self._conflicts += 1
                log.debug("status of %s: conflict, reading again", cluster)
                obj = None
        raise KubeError(
            409, "Conflict", f"status of {cluster}: still conflicting after {self._max_attempts} tries"
        )

    def forget(self, cluster: ClusterRef) -> None:
        self._last.pop(cluster, None)


class KubeEventSink:
    """actors.ports.EventSink: one core/v1 Event per operation, on the EtcdCluster.

    Events are the audit trail `kubectl describe etcdcluster` shows. Failing to write one is
    logged, never raised: an operation already done must not be reported as failed.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        component: str = m.MANAGED_BY,
        instance: str | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._component = component
        self._instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        self._now = now
        self._uids: dict[ClusterRef, str] = {}
        self._sequence = 0

    async def _uid(self, cluster: ClusterRef) -> str:
        if cluster not in self._uids:
            obj = await self._client.get_or_none(m.cluster_path(cluster))
            if obj is None:
                return ""
            self._uids[cluster] = str((obj.get("metadata") or {}).get("uid", ""))
        return self._uids[cluster]

    async def record(
        self,
        cluster: ClusterRef,
        *,
        reason: str,
        message: str,
        warning: bool = False,
        measured: Measurement | None = None,
    ) -> None:
        try:
            uid = await self._uid(cluster)
        except KubeError:
            uid = ""  # the Event still names the cluster
        await self.record_on(
            KIND, cluster.namespace, cluster.name, uid, reason=reason, message=message, warning=warning
        )

    async def record_on(
        self,
        kind: str,
        namespace: str,
        name: str,
        uid: str,
        *,
        reason: str,
        message: str,
        warning: bool = False,
    ) -> None:
        """An Event on any object of our API group (an EtcdBackup, say)."""
        try:
            event = self._event(kind, namespace, name, uid, reason, message, warning)
            await self._client.create(m.core_path(namespace, "events"), event)
        except KubeError as exc:
            # A namespace being deleted takes no Event: expected, and about to go with it.
            level = logging.INFO if is_namespace_terminating(exc) else logging.WARNING
            log.log(
                level,
                "event %s on %s %s/%s not recorded (%s): %s",
                reason,
                kind,
                namespace,
                name,
                exc,
                message,
            )

    def _event(
        self, kind: str, namespace: str, name: str, uid: str, reason: str, message: str, warning: bool
    ) -> Obj:
        now = self._now()
        self._sequence += 1
        stamp = _stamp(now)
        involved = {
            "apiVersion": f"{API_GROUP}/{API_VERSION}",
            "kind": kind,
            "name": name,
            "namespace": namespace,
        }
        if uid:
            involved["uid"] = uid
        return {
            "apiVersion": "v1",
            "kind": "Event",
            # client-go's naming: the object's name and a unique suffix.
            "metadata": {
                "name": f"{name}.{time.time_ns():x}{self._sequence:x}",
                "namespace": namespace,
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }

"""The Kubernetes operator's pieces, assembled: what `etcd-supervisor run` calls.

How they fit::

    open_asyncio_loop()                          (the CLI, once, at the root)
     └ run_operator(...)
        ├ serve_endpoints(port)                  /healthz always; /readyz per Readiness; /metrics
        │                                          (supervisor/metrics: hypercorn on trio)
        └ LeaderElector.run(lead)                passive until this replica holds the Lease
           └ lead()                              cancelled at once if the Lease is lost
              ├ KubeRuntime.run()                pod + claim watches -> watch_members callbacks
              ├ Watcher(etcdclusters) x N        -> ClusterEvent channel
              └ serve_clusters(ports, events)    the caller's: one actor per ClusterRef

`serve_clusters` is the caller's (KubeClusters.serve in clusters.py): it reads ClusterEvents and
keeps the fleet (actors/fleet.py) in step, one cluster tree per ClusterRef, each given
`ports.runtime`, `ports.status`, `ports.events` and an etcd admin of its own. An event with
`deleting` set means the user deleted the EtcdCluster and our finalizer holds it: the fleet
stops the cluster's actors, then calls `ports.runtime.delete_cluster(ref, keep_data=<reclaimPolicy
is Retain>)`, which also releases the finalizer. `object is None` (type DELETED) means it is gone
for good.

Readiness: a passive replica is ready (it is a healthy standby); the leader is ready once the
watches have listed everything, i.e. once it acts on the whole picture.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio
from attrs import frozen
from prometheus_client import CollectorRegistry

from supervisor.aio import running_in_asyncio_loop
from supervisor.kube.client import KubeClient, KubeError, open_kube_client
from supervisor.kube.leader import LeaderElectionConfig, LeaderElector
from supervisor.kube.manifests import DEFAULT_CLUSTER_DOMAIN, core_path
from supervisor.kube.metrics import OperatorMetrics
from supervisor.kube.network_policy import OperatorAccess, operator_peers, operator_pod_labels
from supervisor.kube.runtime import KubeRuntime
from supervisor.kube.status import KubeEventSink, KubeStatusSink
from supervisor.kube.watch import (
    ETCD_CLUSTERS,
    ClusterEvent,
    WatchEvent,
    WatchOptions,
    cluster_event,
    run_watchers,
    watchers_for,
)
from supervisor.metrics.http import Endpoints, Readiness, serve_endpoints

log = logging.getLogger(__name__)

READY_WATCHES = "watches-synced"
DEFAULT_OPERATOR_NAMESPACE = "etcd-supervisor"


@frozen
class OperatorPorts:
    """What the cluster actors get: the adapters behind actors.ports, on one client."""

    client: KubeClient
    runtime: KubeRuntime
    status: KubeStatusSink
    events: KubeEventSink


ServeClusters = Callable[[OperatorPorts, trio.MemoryReceiveChannel[ClusterEvent]], Awaitable[None]]


def default_identity() -> str:
    """The Lease holder name: the pod's name in-cluster (downward API), else host and pid."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def default_lease_namespace() -> str:
    return os.environ.get("POD_NAMESPACE") or DEFAULT_OPERATOR_NAMESPACE


async def operator_access(
    client: KubeClient, access: OperatorAccess, environ: Mapping[str, str] = os.environ
) -> OperatorAccess:
    """`access` with this operator's pods added when it runs in a cluster (POD_NAME and
    POD_NAMESPACE from the downward API: its pod's labels are read once, as its image is); a
    warning when no NetworkPolicy would admit it at all (outside a cluster without
    --operator-cidr: its clusters' members would refuse it)."""
    name, namespace = environ.get("POD_NAME"), environ.get("POD_NAMESPACE")
    if name and namespace:
        try:
            pod = await client.get(core_path(namespace, "pods", name))
        except KubeError as exc:
            log.warning("cannot read this operator's pod %s/%s for its labels: %s", namespace, name, exc)
        else:
            labels = operator_pod_labels((pod.get("metadata") or {}).get("labels") or {})
            access = attrs.evolve(access, namespace=namespace, pod_labels=labels)
    if not operator_peers(access):
        log.warning(
            "no NetworkPolicy will admit this operator: it runs outside a cluster and no --operator-cidr"
            " names the addresses it connects from; clusters with spec.security.networkPolicy (the"
            " default) will refuse it where a NetworkPolicy implementation runs"
        )
    return access


async def lead(
    ports: OperatorPorts,
    serve_clusters: ServeClusters,
    *,
    namespaces: list[str] | None,
    readiness: Readiness,
    watch_options: WatchOptions | None = None,
    metrics: OperatorMetrics | None = None,
) -> None:
    """Everything the leader runs; returns when serve_clusters does."""
    readiness.require(READY_WATCHES)
    readiness.set(READY_WATCHES, False)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: ports.runtime.run(
                    namespaces=namespaces, options=watch_options, task_status=task_status
                )
            )
            raw_send, raw_recv = trio.open_memory_channel[WatchEvent](64)
            events_send, events_recv = trio.open_memory_channel[ClusterEvent](64)
            watchers = watchers_for(ports.client, ETCD_CLUSTERS, namespaces, options=watch_options)
            if metrics is not None:
                metrics.watching([*watchers, *ports.runtime.watchers])
            await nursery.start(run_watchers, watchers, raw_send)
            readiness.set(READY_WATCHES, True)

            async def translate() -> None:
                async with raw_recv, events_send:
                    async for event in raw_recv:
                        translated = cluster_event(event)
                        if translated is not None:
                            await events_send.send(translated)

            nursery.start_soon(translate)
            await serve_clusters(ports, events_recv)
            nursery.cancel_scope.cancel()
    finally:
        # Back to standby (or shutting down): a standby is ready as it is.
        readiness.drop(READY_WATCHES)


async def run_operator(
    *,
    serve_clusters: ServeClusters,
    kubeconfig: str | None = None,
    namespaces: list[str] | None = None,
    health_port: int = 8080,
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN,
    lease_namespace: str | None = None,
    identity: str | None = None,
    election: LeaderElectionConfig | None = None,
    watch_options: WatchOptions | None = None,
    registry: CollectorRegistry | None = None,
    helper_image: str | None = None,
    access: OperatorAccess | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the operator until cancelled (or until serve_clusters returns).

    Call inside supervisor.aio.open_asyncio_loop(). namespaces=None watches all namespaces.
    cluster_domain: the Kubernetes DNS domain that member URLs are fully qualified under.
    task_status.started(health port) once the HTTP endpoints listen; /metrics serves `registry`
    (the caller's cluster and runtime metrics), with the operator's own metrics added to it.
    access: what the clusters' NetworkPolicies admit as this operator (in a cluster, its own
    pod's namespace and labels are added: operator_access).
    """
    if not running_in_asyncio_loop():
        raise RuntimeError("run_operator must run inside supervisor.aio.open_asyncio_loop()")
    config = election or LeaderElectionConfig(
        namespace=lease_namespace or default_lease_namespace(), identity=identity or default_identity()
    )
    readiness = Readiness()
    registry = registry if registry is not None else CollectorRegistry()
    metrics = OperatorMetrics(registry)
    async with open_kube_client(kubeconfig) as client, trio.open_nursery() as nursery:
        port = await nursery.start(serve_endpoints, health_port, Endpoints(readiness, registry))
        task_status.started(port)
        runtime = KubeRuntime(
            client,
            cluster_domain=cluster_domain,
            helper_image=helper_image,
            access=await operator_access(client, access or OperatorAccess()),
        )
        ports = OperatorPorts(
            client=client,
            runtime=runtime,
            status=KubeStatusSink(client),
            events=KubeEventSink(client, instance=config.identity),
        )
        elector = LeaderElector(client, config)
        metrics.elector, metrics.status, metrics.client = elector, ports.status, client

        async def body() -> None:
            await lead(
                ports,
                serve_clusters,
                namespaces=namespaces,
                readiness=readiness,
                watch_options=watch_options,
                metrics=metrics,
            )

        await elector.run(body)
        nursery.cancel_scope.cancel()

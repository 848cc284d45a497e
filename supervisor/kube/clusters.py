"""`etcd-supervisor run`: EtcdCluster events -> one cluster tree per resource, on Kubernetes.

run_operator (operator.py) does leader election, watches and health; this is the part it
calls `serve_clusters`: it turns each ClusterEvent into a Fleet change, and gives every
cluster actor the Kubernetes runtime, status and event sinks and an etcd client that speaks
TLS with the client certificate from the cluster's Secret.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio
from prometheus_client import CollectorRegistry

from actors.assess import not_created_status
from actors.backup.deltas import HistoryStream
from actors.backup.records import KvHash, SnapshotTaken
from actors.backup.services import BackupTiming
from actors.cluster_context import Desired, Timing
from actors.codec import InvalidCluster, parse_cluster, parse_spec
from actors.fleet import Fleet
from actors.maintenance.actor import defrag_child
from actors.model import (
    API_GROUP,
    API_VERSION,
    KIND,
    ClusterRef,
    ClusterResource,
    EtcdMember,
    MemberHealth,
    ReclaimPolicy,
)
from actors.platform import Platform, open_supervisor
from actors.ports import EtcdAdmin
from supervisor.aio import open_asyncio_loop
from supervisor.audit import AuditLogged
from supervisor.etcd.admin import EtcdAdminAdapter
from supervisor.etcd.tls import TlsFiles
from supervisor.kube import manifests as m
from supervisor.kube.backup_requests import KubeBackupRequests, KubeBackupResolver
from supervisor.kube.backups import pod_verifiers, secret_stores
from supervisor.kube.certificates import KubeCertificates
from supervisor.kube.client import KubeClient, KubeError
from supervisor.kube.etcd_auth import KubeEtcdAuth
from supervisor.kube.network_policy import OperatorAccess
from supervisor.kube.operator import OperatorPorts, run_operator
from supervisor.kube.pod_names import PodNames
from supervisor.kube.refusals import refusals_fail_the_step
from supervisor.kube.secret_tls import client_tls_under, write_client_tls
from supervisor.kube.snapshots import KubeRestorer, helper_image
from supervisor.kube.store_credentials import SecretKeys
from supervisor.kube.voter_budget import promoted, removed
from supervisor.kube.voter_labels import VoterLabels
from supervisor.kube.watch import ClusterEvent
from supervisor.metrics import open_runtime_metrics
from supervisor.metrics.clusters import ClusterMetrics
from supervisor.metrics.loglevel import follow_log_level_file
from supervisor.signals import cancel_on_signal

log = logging.getLogger(__name__)


class SecretTlsAdmin:
    """actors.ports.EtcdAdmin for one cluster, with TLS material read from its Secret.

    The Secret appears when the runtime allocates the first member, after this object is
    made, so it is read on first use (and again until it exists).
    """

    def __init__(
        self,
        client: KubeClient,
        ref: ClusterRef,
        *,
        tls: bool,
        files_dir: Path,
        call_timeout: float,
        voters: VoterLabels | None = None,
        names: PodNames | None = None,
        seed: Callable[[], Awaitable[None]] | None = None,
    ):
        self._client = client
        # spec.adopt: the old members' short names, resolved as the cluster's pods resolve them.
        self._names = names
        # Makes the TLS Secret where the operator must reach members before making any (an
        # adopted cluster's, supervisor/kube/adopted_tls.py).
        self._seed = seed
        # The disruption budget follows every membership read and change (voter_labels.py).
        self._voters = voters
        self._ref = ref
        self._tls = tls
        self._files_dir = files_dir
        self._call_timeout = call_timeout
        self._inner: EtcdAdminAdapter | None = None

    async def _reach(self, urls: Sequence[str]) -> list[str]:
        """`urls` as this cluster's pods would dial them (pod_names.py: an adopted cluster's short names)."""
        return list(urls) if self._names is None else await self._names.qualified(urls)

    async def _admin(self) -> EtcdAdminAdapter:
        if self._inner is None:
            config = await self._tls_config() if self._tls else None
            self._inner = EtcdAdminAdapter(tls=config, call_timeout=self._call_timeout)
        return self._inner

    async def _tls_config(self) -> TlsFiles:
        if self._seed is not None:
            await self._seed()
        return await write_client_tls(self._client, self._ref, self._files_dir)

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()

    async def member_list(self, endpoints: Sequence[str]) -> Sequence[EtcdMember]:
        endpoints = await self._reach(endpoints)
        if self._voters is None:
            return await self._member_list(endpoints)
        return await self._voters.read(lambda: self._member_list(endpoints))

    async def _member_list(self, endpoints: Sequence[str]) -> Sequence[EtcdMember]:
        return await (await self._admin()).member_list(endpoints)

    async def auth_enabled(self, endpoints: Sequence[str]) -> bool:
        endpoints = await self._reach(endpoints)
        return await (await self._admin()).auth_enabled(endpoints)

    async def add_learner(self, endpoints: Sequence[str], peer_url: str) -> EtcdMember:
        endpoints = await self._reach(endpoints)
        return await (await self._admin()).add_learner(endpoints, peer_url)

    @refusals_fail_the_step
    async def promote(self, endpoints: Sequence[str], member_id: int) -> None:
        endpoints = await self._reach(endpoints)

        async def step() -> None:
            await (await self._admin()).promote(endpoints, member_id)

        await self._membership_step(endpoints, step, lambda now: promoted(now, member_id))

    @refusals_fail_the_step
    async def remove(self, endpoints: Sequence[str], member_id: int) -> None:
        endpoints = await self._reach(endpoints)

        async def step() -> None:
            await (await self._admin()).remove(endpoints, member_id)

        await self._membership_step(endpoints, step, lambda now: removed(now, member_id))

    async def _membership_step(
        self,
        endpoints: Sequence[str],
        step: Callable[[], Awaitable[None]],
        expected: Callable[[Sequence[EtcdMember]], Sequence[EtcdMember]],
    ) -> None:
        """`step` with the disruption budget written safe for before and after it."""
        if self._voters is None:
            return await step()
        await self._voters.change(lambda: self._member_list(endpoints), step, expected)

    async def move_leader(self, endpoints: Sequence[str], target_id: int) -> None:
        endpoints = await self._reach(endpoints)
        await (await self._admin()).move_leader(endpoints, target_id)

    async def downgrade(self, endpoints: Sequence[str], action: str, version: str) -> str:
        endpoints = await self._reach(endpoints)
        return await (await self._admin()).downgrade(endpoints, action, version)

    async def member_health(self, client_url: str) -> MemberHealth:
        (client_url,) = await self._reach([client_url])
        return await (await self._admin()).member_health(client_url)

    async def revision(self, endpoints: Sequence[str]) -> int:
        endpoints = await self._reach(endpoints)
        return await (await self._admin()).revision(endpoints)

    async def snapshot(self, endpoint: str, sink: Callable[[bytes], Awaitable[None]]) -> SnapshotTaken:
        (endpoint,) = await self._reach([endpoint])
        return await (await self._admin()).snapshot(endpoint, sink)

    async def kv_hash(self, endpoint: str, revision: int) -> KvHash:
        (endpoint,) = await self._reach([endpoint])
        return await (await self._admin()).kv_hash(endpoint, revision)

    async def compact(self, endpoints: Sequence[str], revision: int) -> None:
        endpoints = await self._reach(endpoints)
        await (await self._admin()).compact(endpoints, revision)

    async def defragment(self, client_url: str) -> None:
        (client_url,) = await self._reach([client_url])
        await (await self._admin()).defragment(client_url)

    async def append_empty_entry(self, endpoints: Sequence[str]) -> None:
        endpoints = await self._reach(endpoints)
        await (await self._admin()).append_empty_entry(endpoints)

    async def disarm_nospace(self, endpoints: Sequence[str]) -> int:
        endpoints = await self._reach(endpoints)
        return await (await self._admin()).disarm_nospace(endpoints)

    @asynccontextmanager
    async def follow(self, endpoints: Sequence[str], start_revision: int) -> AsyncIterator[HistoryStream]:
        """actors.backup.deltas.HistorySource, for delta backups (history_of in actors/backup/services.py)."""
        endpoints = await self._reach(endpoints)
        async with (await self._admin()).follow(endpoints, start_revision) as stream:
            yield stream


def as_document(obj: Mapping[str, Any]) -> dict[str, Any]:
    # Items of a list response carry no apiVersion/kind; the resource type is known here.
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND, **obj}


def _private_tls_root() -> Path:
    """A private directory for the clusters' client key pairs, removed when the process ends:
    keys are not left behind in /tmp (a restart reads them from the Secrets again)."""
    root = Path(tempfile.mkdtemp(prefix="etcd-supervisor-tls-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


class KubeClusters:
    """serve_clusters for run_operator: one Fleet, fed by EtcdCluster events."""

    def __init__(
        self,
        *,
        timing: Timing | None = None,
        tls_root: Path | None = None,
        registry: CollectorRegistry | None = None,
        helper_image: str | None = None,
        backup_wake_every: float | None = None,
        namespaces: list[str] | None = None,
    ) -> None:
        self._timing = timing or Timing()
        self._tls_root = tls_root or _private_tls_root()
        self._registry = registry if registry is not None else CollectorRegistry()
        self._metrics: ClusterMetrics | None = None
        # The operator's own image, for the pods that receive snapshots (supervisor/kube/snapshots.py).
        self._helper_image = helper_image
        self._backup_wake_every = backup_wake_every
        self._namespaces = namespaces  # where EtcdBackups are watched (None: everywhere)

    def _metrics_for(self, ports: OperatorPorts) -> ClusterMetrics:
        # Once per process: a new leadership keeps counting where the last one stopped.
        if self._metrics is None:
            # The audit trail's log line is written on the way to the Events (supervisor/audit.py).
            self._metrics = ClusterMetrics(self._registry, ports.status, AuditLogged(ports.events))
        return self._metrics

    def _platform(
        self, ports: OperatorPorts, metrics: ClusterMetrics, image: str | None, requests: KubeBackupRequests
    ) -> Platform:
        """The operator's Platform: pods, the status subresource and Events (through the
        metrics), an etcd admin per cluster with TLS from its Secret, stores on the credentials
        Secret, restores and verifications in pods of the operator's image."""
        tls_files = client_tls_under(ports.client, self._tls_root)
        stores = secret_stores(ports.client)
        keys = SecretKeys(ports.client)

        def admin_for(resource: ClusterResource) -> EtcdAdmin:
            adopting = resource.spec.adopt is not None and resource.spec.tls_enabled
            seed = partial(ports.runtime.seed_adopted_tls, resource) if adopting else None
            return SecretTlsAdmin(
                ports.client,
                resource.ref,
                tls=resource.spec.tls_enabled,
                files_dir=self._tls_root / resource.ref.namespace / resource.ref.name,
                call_timeout=self._timing.call_timeout,
                voters=VoterLabels(ports.client, resource.ref, ports.runtime.voter_budgets),
                names=(
                    PodNames(resource.ref.namespace, ports.runtime.cluster_domain)
                    if resource.spec.adopt is not None
                    else None
                ),
                seed=seed,
            )

        return Platform(
            ports.runtime,
            metrics,
            metrics,
            admin_for,
            restorer=KubeRestorer(
                ports.client, stores, image, tls_files, KubeBackupResolver(ports.client), keys
            ),
            stores=stores,
            keys=keys,
            verifier=pod_verifiers(ports.client, image, tls_files),
            requests=requests,
            certificates=KubeCertificates(ports.client, self._tls_root),
            auth_for=lambda ref: KubeEtcdAuth(
                ports.client,
                ref,
                files_dir=self._tls_root / ref.namespace / ref.name,
                call_timeout=self._timing.call_timeout,
            ),
        )

    async def serve(self, ports: OperatorPorts, events: trio.MemoryReceiveChannel[ClusterEvent]) -> None:
        metrics = self._metrics_for(ports)
        image = self._helper_image or await helper_image(ports.client)
        requests = KubeBackupRequests(ports.client, ports.events, self._namespaces)
        platform = self._platform(ports, metrics, image, requests)
        wake = self._backup_wake_every
        backup_timing = BackupTiming() if wake is None else BackupTiming(wake_every=wake)
        async with (
            trio.open_nursery() as nursery,
            open_supervisor(
                platform,
                timing=self._timing,
                children=[defrag_child(), metrics.child],
                backup_timing=backup_timing,
            ) as fleet,
            events,
        ):
            nursery.start_soon(requests.run)  # not awaited: a missing CRD must not stop the clusters
            async for event in events:
                await self._on_event(fleet, ports, metrics, event)
            nursery.cancel_scope.cancel()

    async def _on_event(
        self, fleet: Fleet, ports: OperatorPorts, metrics: ClusterMetrics, event: ClusterEvent
    ) -> None:
        ref = event.ref
        if event.object is None:  # gone for good (the finalizer was already released)
            if ref in fleet:
                await fleet.remove(ref)
            ports.status.forget(ref)
            metrics.forget(ref)
            return
        if event.deleting:
            if ref in fleet:
                await fleet.remove(ref)  # stops the actors, then delete_cluster releases the finalizer
            else:
                spec = parse_spec(event.object.get("spec") or {})
                await ports.runtime.delete_cluster(
                    ref, keep_data=spec.storage.reclaim_policy is ReclaimPolicy.RETAIN
                )
            return
        try:
            resource = parse_cluster(as_document(event.object))
        except InvalidCluster as exc:
            await self._report_invalid(fleet, metrics, ref, event.object, str(exc))
            return
        await fleet.upsert(Desired(resource))
        if not resource.suspended:  # a suspended cluster: nothing changes, its policy neither
            await self._keep_network_policy(ports, event.object, resource)

    async def _keep_network_policy(
        self, ports: OperatorPorts, obj: Mapping[str, Any], resource: ClusterResource
    ) -> None:
        """A changed networkPolicy or clientSelector applies now, not at the next member step;
        a refusal is logged and tried again at the next event (member steps make sure of the
        policy too)."""
        owner = m.Owner(resource.ref, str((obj.get("metadata") or {}).get("uid", "")))
        try:
            await ports.runtime.keep_network_policy(owner, resource.spec)
        except KubeError as exc:
            log.warning("cannot write the NetworkPolicy of %s: %s", resource.ref, exc)

    async def _report_invalid(
        self, fleet: Fleet, sinks: ClusterMetrics, ref: ClusterRef, obj: Mapping[str, Any], problem: str
    ) -> None:
        log.error(
            "EtcdCluster %s is invalid: %s",
            ref,
            problem,
            extra={"event": "invalid-spec", "cluster": str(ref)},
        )
        await sinks.record(ref, reason="InvalidSpec", message=problem, warning=True)
        if await fleet.report_problem(ref, problem):
            return
        generation = (obj.get("metadata") or {}).get("generation", 0)
        generation = generation if isinstance(generation, int) else 0
        await sinks.publish(ref, not_created_status(problem, generation=generation, now=time.time()))


async def run_kube(
    *,
    kubeconfig: str | None,
    namespaces: list[str] | None,
    health_port: int,
    cluster_domain: str = m.DEFAULT_CLUSTER_DOMAIN,
    timing: Timing | None = None,
    log_level_file: Path | None = None,
    helper_image: str | None = None,
    access: OperatorAccess | None = None,
) -> None:
    """The whole operator until SIGINT/SIGTERM: leader election, watches, cluster actors, the
    HTTP endpoints (health, readiness, metrics, log level)."""
    registry = CollectorRegistry()
    clusters = KubeClusters(
        timing=timing, registry=registry, helper_image=helper_image, namespaces=namespaces
    )
    async with open_runtime_metrics(registry), open_asyncio_loop(), trio.open_nursery() as nursery:
        nursery.start_soon(cancel_on_signal, nursery.cancel_scope)
        if log_level_file is not None:
            nursery.start_soon(follow_log_level_file, log_level_file)
        await run_operator(
            serve_clusters=clusters.serve,
            kubeconfig=kubeconfig,
            namespaces=namespaces,
            health_port=health_port,
            cluster_domain=cluster_domain,
            registry=registry,
            helper_image=helper_image,
            access=access,
        )
        nursery.cancel_scope.cancel()

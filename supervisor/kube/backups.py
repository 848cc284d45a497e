"""Backups on Kubernetes: the backup actor (actors/backup/) with stores opened on the
credentials Secret in the cluster's namespace, and verification in a pod (snapshots.py).

A local store (`store.local.path`) is a directory in the operator's pod: mount a volume there
(the Helm chart's `backupVolume`, deploy/README for kustomize), or its backups go with the pod.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable

import attrs

from actors.backup.actor import backup_child
from actors.backup.delta_actor import delta_child
from actors.backup.deltas import HistorySource
from actors.backup.ports import BackupPorts, BackupRequests
from actors.cluster_context import ChildFactory, ClusterContext
from actors.model import StoreSpec
from actors.store_port import ObjectInfo, ObjectStore, StoredObject
from supervisor.kube.client import KubeClient
from supervisor.kube.secret_tls import TlsFilesFor
from supervisor.kube.snapshots import KubeVerifier
from supervisor.kube.store_credentials import secret_credentials
from supervisor.runtime import ChildSpec

log = logging.getLogger(__name__)


class SecretStore:
    """actors.store_port.ObjectStore opened on first use with the credentials its Secret holds
    then (read at each opening: a rotated key is picked up by the next backup)."""

    def __init__(self, client: KubeClient, namespace: str, spec: StoreSpec) -> None:
        self._client = client
        self._namespace = namespace
        self._spec = spec
        self._inner: ObjectStore | None = None

    async def _store(self) -> ObjectStore:
        if self._inner is None:
            # Imported on first use: the store clients (obstore, google-cloud-storage) add
            # seconds to the operator's start.
            from supervisor.stores.factory import open_store

            credentials = await secret_credentials(self._client, self._namespace, self._spec)
            self._inner = open_store(self._spec, credentials=credentials)
        return self._inner

    async def put_stream(self, key: str, chunks: AsyncIterable[bytes]) -> StoredObject:
        return await (await self._store()).put_stream(key, chunks)

    async def put_bytes(self, key: str, data: bytes) -> StoredObject:
        return await (await self._store()).put_bytes(key, data)

    async def get_stream(self, key: str) -> AsyncIterator[bytes]:
        async for chunk in (await self._store()).get_stream(key):
            yield chunk

    async def get_bytes(self, key: str) -> bytes:
        return await (await self._store()).get_bytes(key)

    async def list(self, prefix: str) -> list[ObjectInfo]:
        return await (await self._store()).list(prefix)

    async def delete(self, key: str) -> None:
        await (await self._store()).delete(key)

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()


def secret_store_opener(client: KubeClient) -> Callable[[str, StoreSpec], ObjectStore]:
    """(namespace, store) -> the store, with credentials from that namespace's Secret."""
    return lambda namespace, spec: SecretStore(client, namespace, spec)


def kube_backups(
    client: KubeClient,
    *,
    helper_image: str | None,
    tls_files: TlsFilesFor,
    requests: BackupRequests | None = None,
    clock: Callable[[], float] = time.time,
    wake_every: float | None = None,
) -> list[ChildFactory]:
    """The backup children of every cluster: the backup actor and the delta follower (idle
    without spec.backup.deltaPeriod). Verification needs the operator's image (helper_image),
    on-demand backups the EtcdBackup watch (`requests`)."""
    opener = secret_store_opener(client)
    if helper_image is None:
        log.warning(
            "the operator's image is unknown: backups will be stored unverified", extra={"event": "backup"}
        )

    def ports_of(context: ClusterContext) -> BackupPorts:
        verifier = (
            KubeVerifier(
                client, context.ref, lambda: context.desired().resource.spec, helper_image, tls_files
            )
            if helper_image
            else None
        )
        return BackupPorts(lambda spec: opener(context.ref.namespace, spec), verifier, clock, requests)

    def backups(context: ClusterContext) -> ChildSpec:
        ports = ports_of(context)
        factory = backup_child(ports) if wake_every is None else backup_child(ports, wake_every=wake_every)
        return factory(context)

    def deltas(context: ClusterContext) -> ChildSpec:
        # The follower's full backups (a compaction overtook its watch) are never on-demand ones.
        ports = attrs.evolve(ports_of(context), requests=None)
        return delta_child(ports, history_of)(context)

    return [backups, deltas]


def history_of(context: ClusterContext) -> HistorySource | None:
    """The cluster's etcd admin follows history (the Watch RPC) for the delta follower."""
    admin = context.ports.admin
    return admin if isinstance(admin, HistorySource) else None

"""Backups on Kubernetes, for the operator's Platform: stores opened on the credentials Secret
in the cluster's namespace, and verification in a pod (snapshots.py).

A local store (`store.local.path`) is a directory in the operator's pod: mount a volume there
(the Helm chart's `backupVolume`, deploy/README for kustomize), or its backups go with the pod.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator

from actors.backup.services import StoreOpener, VerifierFactory
from actors.model import ClusterRef, StoreSpec
from actors.store_port import ObjectInfo, ObjectStore, StoredObject
from supervisor.kube.client import KubeClient
from supervisor.kube.secret_tls import TlsFilesFor
from supervisor.kube.snapshots import KubeVerifier
from supervisor.kube.store_credentials import secret_credentials

log = logging.getLogger(__name__)


class SecretStore:
    """actors.store_port.ObjectStore opened on first use with the credentials its Secret holds
    then (read at each opening: a rotated key is picked up by the next backup)."""

    def __init__(
        self, client: KubeClient, namespace: str, spec: StoreSpec, lock_days: int | None = None
    ) -> None:
        self._client = client
        self._namespace = namespace
        self._spec = spec
        self._lock_days = lock_days
        self._inner: ObjectStore | None = None

    async def _store(self) -> ObjectStore:
        if self._inner is None:
            # Imported on first use: the store clients (obstore, google-cloud-storage) add
            # seconds to the operator's start.
            from supervisor.stores.factory import open_store

            credentials = await secret_credentials(self._client, self._namespace, self._spec)
            self._inner = open_store(self._spec, credentials=credentials, lock_days=self._lock_days)
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


def secret_stores(client: KubeClient) -> StoreOpener:
    """The Platform's store opener: a cluster's stores with its namespace's credentials Secret."""

    def opener(cluster: ClusterRef, spec: StoreSpec, *, lock_days: int | None = None) -> ObjectStore:
        return SecretStore(client, cluster.namespace, spec, lock_days)

    return opener


def pod_verifiers(
    client: KubeClient, helper_image: str | None, tls_files: TlsFilesFor
) -> VerifierFactory | None:
    """Each cluster's backups verified in a pod of the operator's image (helper_image); None,
    with a warning, when that image is unknown."""
    if helper_image is None:
        log.warning(
            "the operator's image is unknown: backups will be stored unverified", extra={"event": "backup"}
        )
        return None
    return lambda cluster, spec: KubeVerifier(client, cluster, spec, helper_image, tls_files)

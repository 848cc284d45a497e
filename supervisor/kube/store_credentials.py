"""Credentials of an object store on Kubernetes: the Secret its `credentialsSecret` names; and
the backup encryption keys: the Secret `spec.backup.encryption.keySecret` names.

Read from the cluster's namespace at each use (a rotated key is picked up by the next backup);
only that Secret is read, so the operator's RBAC can be limited to the Secrets it is pointed at.
"""

from __future__ import annotations

import base64
import binascii

from actors.backup.keys import KeyRing, key_ring_from
from actors.errors import BackupKeyMissing, StoreAccessDenied, StoreError
from actors.model import AzureStore, ClusterRef, GcsStore, S3Store, StoreSpec
from actors.store_port import (
    GCS_CREDENTIAL_KEY,
    GcsCredentials,
    StoreCredentials,
    azure_credentials_from,
    s3_credentials_from,
)
from supervisor.kube.client import KubeClient, KubeError


async def secret_credentials(client: KubeClient, namespace: str, spec: StoreSpec) -> StoreCredentials:
    """The credentials for `spec` from its Secret; None when it names none (local, or ambient IAM).

    StoreAccessDenied when the Secret is missing, unreadable (RBAC) or lacks a key; an API server
    that does not answer stays a KubeUnavailable (it says nothing about the store).
    """
    store = spec.chosen
    if not isinstance(store, S3Store | GcsStore | AzureStore) or not store.credentials_secret:
        return None
    where = f"{store.describe()}: credentialsSecret {namespace}/{store.credentials_secret}"
    values = await _secret_data(client, namespace, store.credentials_secret, where)
    if isinstance(store, S3Store):
        return s3_credentials_from(values, where)
    if isinstance(store, AzureStore):
        return azure_credentials_from(values, where)
    if not values.get(GCS_CREDENTIAL_KEY):
        raise StoreAccessDenied(f"{where}: {GCS_CREDENTIAL_KEY} missing")
    return GcsCredentials(values[GCS_CREDENTIAL_KEY])


class SecretKeys:
    """actors.backup.ports.BackupKeySource: spec.backup.encryption.keySecret, a Secret in the
    cluster's namespace (`key`: the current key; other names: older ones), read at each use."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    async def key_ring(self, cluster: ClusterRef, secret: str) -> KeyRing:
        where = f"keySecret {cluster.namespace}/{secret}"
        values = await _secret_data(self._client, cluster.namespace, secret, where, BackupKeyMissing)
        return key_ring_from(values, where)


async def _secret_data(
    client: KubeClient, namespace: str, name: str, where: str, refused: type[StoreError] = StoreAccessDenied
) -> dict[str, str]:
    """The Secret's values; `refused` (naming `where`) when it is missing or unreadable."""
    try:
        secret = await client.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    except KubeError as exc:
        if exc.status in (401, 403, 404):
            raise refused(f"{where}: {exc}") from exc
        raise
    try:
        return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise refused(f"{where}: a value is not base64 text: {exc}") from exc

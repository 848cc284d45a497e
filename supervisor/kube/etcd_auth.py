"""etcd's users and roles of a cluster on Kubernetes (actors/ports.EtcdAuth): the calls through
an etcd client with the operator's client certificate from the cluster's TLS Secret, passwords
from each user's passwordSecret (key `password`), and users' client certificates signed by the
cluster's CA into each user's clientCertSecret (ca.crt, tls.crt, tls.key; owned by the
EtcdCluster, so they go with it)."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from actors.errors import EtcdUnavailable
from actors.model import CertificatesSpec, ClusterRef, UserSpec
from supervisor import brought_tls, ca_material, pki
from supervisor.etcd import EtcdClient
from supervisor.etcd.auth_store import ClientAuth
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError
from supervisor.kube.secret_tls import write_client_tls

PASSWORD_KEY = "password"
CERT, KEY = "tls.crt", "tls.key"


class KubeEtcdAuth(ClientAuth):
    def __init__(
        self,
        client: KubeClient,
        ref: ClusterRef,
        *,
        files_dir: Path,
        call_timeout: float,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._client = client
        self._ref = ref
        self._files_dir = files_dir
        self._call_timeout = call_timeout
        self._now = now

    async def _etcd(self, endpoints: Sequence[str]) -> EtcdClient:
        tls = await write_client_tls(self._client, self._ref, self._files_dir)
        return EtcdClient(list(endpoints), tls=tls, call_timeout=self._call_timeout)

    async def password(self, secret: str) -> str:
        data = await self._secret(secret) or {}
        if not data.get(PASSWORD_KEY):
            raise EtcdUnavailable(f"passwordSecret {self._ref.namespace}/{secret}: no key {PASSWORD_KEY}")
        return base64.b64decode(data[PASSWORD_KEY]).decode()

    async def issue_user_certificate(self, user: UserSpec, certificates: CertificatesSpec) -> bool:
        name = user.client_cert_secret
        assert name is not None
        live = await self._secret(name)
        if (
            live
            and live.get(CERT)
            and not pki.renewal_due(_pem(live, CERT), certificates.renew_before_seconds, self._now())
        ):
            return False
        cluster_tls = await self._secret(m.tls_secret_name(self._ref)) or {}
        if not cluster_tls.get(m.TLS_CA_KEY):
            raise EtcdUnavailable(brought_tls.no_signer(user.name))
        bundle = _pem(cluster_tls, m.TLS_CA_CERT)
        signer = ca_material.Material(bundle, _pem(cluster_tls, m.TLS_CA_KEY), {}).signer()
        life = dt.timedelta(seconds=certificates.validity_seconds)
        leaf = pki.issue(
            signer, user.name, now=self._now(), lifetime=life, server_auth=False, client_auth=True
        )
        data = {m.TLS_CA_CERT: bundle, CERT: leaf.cert_pem(), KEY: leaf.key_pem()}
        await self._write(
            name, {k: base64.b64encode(v).decode() for k, v in data.items()}, exists=live is not None
        )
        return True

    async def _write(self, name: str, data: Mapping[str, str], *, exists: bool) -> None:
        cluster = await self._client.get(m.cluster_path(self._ref))
        owner = m.Owner(self._ref, str((cluster.get("metadata") or {}).get("uid", "")))
        body = m.user_certificate_secret(owner, name, data)
        try:
            if exists:
                await self._client.replace(m.core_path(self._ref.namespace, "secrets", name), body)
            else:
                await self._client.create(m.core_path(self._ref.namespace, "secrets"), body)
        except KubeError as e:
            raise EtcdUnavailable(f"clientCertSecret {self._ref.namespace}/{name} not written: {e}") from e

    async def _secret(self, name: str) -> Mapping[str, Any] | None:
        try:
            secret = await self._client.get_or_none(m.core_path(self._ref.namespace, "secrets", name))
        except KubeError as e:
            raise EtcdUnavailable(f"Secret {self._ref.namespace}/{name} not read: {e}") from e
        return None if secret is None else (secret.get("data") or {})


def _pem(data: Mapping[str, Any], key: str) -> bytes:
    return base64.b64decode(data[key])

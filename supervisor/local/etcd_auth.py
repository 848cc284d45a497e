"""etcd's users and roles of a local cluster (actors/ports.EtcdAuth): the calls through an etcd
client with the supervisor's own client certificate (CN etcd-supervisor, a root user once auth
is on), passwords from files next to the manifest (`password=` lines), and users' client
certificates written to <state-dir>/<namespace>/<cluster>/users/<user>/{ca.crt,tls.crt,tls.key}."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Sequence
from pathlib import Path

from actors.errors import EtcdUnavailable
from actors.model import CertificatesSpec, ClusterRef, UserSpec
from supervisor import brought_tls, pki
from supervisor.etcd import EtcdClient
from supervisor.etcd.auth_store import ClientAuth
from supervisor.local import byo_tls
from supervisor.local.runtime import LocalRuntime
from supervisor.local.tls import ensure_ca, ensure_leaf
from supervisor.stores.credentials import parse_key_values

PASSWORD_KEY = "password"


class LocalEtcdAuth(ClientAuth):
    def __init__(
        self, runtime: LocalRuntime, ref: ClusterRef, *, secrets_dir: Path, call_timeout: float
    ) -> None:
        self._runtime = runtime
        self._ref = ref
        self._secrets_dir = secrets_dir
        self._call_timeout = call_timeout

    async def _etcd(self, endpoints: Sequence[str]) -> EtcdClient:
        tls = self._runtime.client_tls_files(self._ref)
        return EtcdClient(list(endpoints), tls=tls, call_timeout=self._call_timeout)

    async def password(self, secret: str) -> str:
        path = self._secrets_dir / secret
        try:
            password = parse_key_values(path.read_text()).get(PASSWORD_KEY)
        except OSError as e:
            raise EtcdUnavailable(f"passwordSecret {secret!r}: cannot read {path}: {e}") from e
        if not password:
            raise EtcdUnavailable(f"passwordSecret {secret!r}: {path} has no {PASSWORD_KEY}= line")
        return password

    async def issue_user_certificate(self, user: UserSpec, certificates: CertificatesSpec) -> bool:
        cluster = self._runtime.layout.cluster(self._ref)
        directory = cluster.root / "users" / user.name
        cert = directory / "tls.crt"
        if cert.exists() and not pki.renewal_due(
            cert.read_bytes(), certificates.renew_before_seconds, dt.datetime.now(dt.UTC)
        ):
            return False
        if byo_tls.is_brought(cluster.tls_dir):
            raise EtcdUnavailable(brought_tls.no_signer(user.name))
        cert.unlink(missing_ok=True)  # ensure_leaf makes a pair only where none is
        ca = ensure_ca(
            cluster.tls_dir, common_name=f"etcd-supervisor CA {self._ref}", certificates=certificates
        )
        ensure_leaf(ca, directory, stem="tls", common_name=user.name, server=False, certificates=certificates)
        shutil.copyfile(cluster.tls_dir / "ca.crt", directory / "ca.crt")
        return True

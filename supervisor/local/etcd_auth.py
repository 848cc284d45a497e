"""etcd's users and roles of a local cluster (actors/ports.EtcdAuth): the calls through an etcd
client with the supervisor's own client certificate (CN etcd-supervisor, a root user once auth
is on), passwords from files next to the manifest, and users' client certificates written to
<state-dir>/<namespace>/<cluster>/users/<user>/{ca.crt,tls.crt,tls.key}."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509

from actors.auth_plan import AuthState, AuthStep, Op
from actors.errors import EtcdUnavailable
from actors.model import CertificatesSpec, ClusterRef, PermissionType, UserSpec
from supervisor.etcd import EtcdClient, PermissionKind
from supervisor.etcd.admin import translated
from supervisor.local.runtime import LocalRuntime
from supervisor.local.tls import ensure_ca, ensure_leaf
from supervisor.stores.credentials import parse_key_values

KINDS = {
    PermissionType.READ: PermissionKind.READ,
    PermissionType.WRITE: PermissionKind.WRITE,
    PermissionType.READWRITE: PermissionKind.READWRITE,
}
TYPES = {kind: kind_type for kind_type, kind in KINDS.items()}
PASSWORD_KEY = "password"


class LocalEtcdAuth:
    def __init__(
        self, runtime: LocalRuntime, ref: ClusterRef, *, secrets_dir: Path, call_timeout: float
    ) -> None:
        self._runtime = runtime
        self._ref = ref
        self._secrets_dir = secrets_dir
        self._call_timeout = call_timeout

    def _client(self, endpoints: Sequence[str]) -> EtcdClient:
        tls = self._runtime.client_tls_files(self._ref)
        return EtcdClient(list(endpoints), tls=tls, call_timeout=self._call_timeout)

    async def read(self, endpoints: Sequence[str]) -> AuthState:
        return await translated(lambda: self._read(endpoints))

    async def _read(self, endpoints: Sequence[str]) -> AuthState:
        etcd = self._client(endpoints)
        try:
            enabled = await etcd.auth_status()
            users = {name: frozenset(await etcd.user_roles(name)) for name in await etcd.user_list()}
            roles = {}
            for role in await etcd.role_list():
                grants = await etcd.role_permissions(role)
                roles[role] = frozenset((TYPES[kind], key, end) for kind, key, end in grants)
            return AuthState(enabled, users, roles)
        finally:
            await etcd.aclose()

    async def apply(self, endpoints: Sequence[str], step: AuthStep) -> None:
        etcd = self._client(endpoints)
        try:
            await translated(lambda: self._apply(etcd, step))
        finally:
            await etcd.aclose()

    async def _apply(self, etcd: EtcdClient, step: AuthStep) -> None:
        grant = step.grant
        match step.op:
            case Op.ROLE_ADD:
                await etcd.role_add(step.name)
            case Op.ROLE_GRANT if grant is not None:
                await etcd.role_grant_permission(step.name, grant[1], grant[2], kind=KINDS[grant[0]])
            case Op.ROLE_REVOKE if grant is not None:
                await etcd.role_revoke_permission(step.name, grant[1], grant[2])
            case Op.ROLE_DELETE:
                await etcd.role_delete(step.name)
            case Op.USER_ADD if step.password_secret:
                await etcd.user_add(step.name, self._password(step.password_secret))
            case Op.USER_ADD:
                await etcd.user_add_without_password(step.name)
            case Op.USER_GRANT:
                await etcd.user_grant_role(step.name, step.role)
            case Op.USER_REVOKE:
                await etcd.user_revoke_role(step.name, step.role)
            case Op.USER_DELETE:
                await etcd.user_delete(step.name)
            case Op.AUTH_ENABLE:
                await etcd.auth_enable()
            case Op.AUTH_DISABLE:
                await etcd.auth_disable()

    def _password(self, secret: str) -> str:
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
        if cert.exists() and not _due(cert, certificates):
            return False
        cert.unlink(missing_ok=True)  # ensure_leaf makes a pair only where none is
        ca = ensure_ca(
            cluster.tls_dir, common_name=f"etcd-supervisor CA {self._ref}", certificates=certificates
        )
        ensure_leaf(ca, directory, stem="tls", common_name=user.name, server=False, certificates=certificates)
        shutil.copyfile(cluster.tls_dir / "ca.crt", directory / "ca.crt")
        return True


def _due(cert: Path, certificates: CertificatesSpec) -> bool:
    not_after = x509.load_pem_x509_certificate(cert.read_bytes()).not_valid_after_utc
    left = not_after - dt.datetime.now(dt.UTC)
    return left.total_seconds() <= certificates.renew_before_seconds

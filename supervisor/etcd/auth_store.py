"""etcd's users and roles through an EtcdClient, for actors/auth_plan.py's steps: reading what
etcd holds, and taking one step. Both modes' EtcdAuth (actors/ports.py) use it; they differ in
where the client's certificate, users' passwords and users' certificates live."""

from __future__ import annotations

import abc
import secrets
from collections.abc import Awaitable, Callable, Sequence

import trio

from actors.auth_passwords import RECORD_PREFIX, new_record, record_key
from actors.auth_plan import AuthState, AuthStep, Op, prefix_end
from actors.model import PermissionType
from supervisor.etcd.admin import translated
from supervisor.etcd.client import EtcdClient
from supervisor.etcd.records import PermissionKind

KINDS = {
    PermissionType.READ: PermissionKind.READ,
    PermissionType.WRITE: PermissionKind.WRITE,
    PermissionType.READWRITE: PermissionKind.READWRITE,
}
TYPES = {kind: kind_type for kind_type, kind in KINDS.items()}

# passwordSecret -> the password (a mode's Secret or file); raises when it cannot be read.
Passwords = Callable[[str], Awaitable[str]]


async def read_auth(etcd: EtcdClient) -> AuthState:
    enabled = await etcd.auth_status()
    users = {name: frozenset(await etcd.user_roles(name)) for name in await etcd.user_list()}
    roles = {}
    for role in await etcd.role_list():
        grants = await etcd.role_permissions(role)
        roles[role] = frozenset((TYPES[kind], key, end) for kind, key, end in grants)
    prefix = RECORD_PREFIX.encode()
    records = {
        kv.key[len(prefix) :].decode(errors="replace"): kv.value.decode(errors="replace")
        for kv in await etcd.range(prefix, prefix_end(prefix))
    }
    return AuthState(enabled, users, roles, records)


async def apply_step(etcd: EtcdClient, step: AuthStep, passwords: Passwords) -> None:
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
            password = await passwords(step.password_secret)
            await etcd.user_add(step.name, password)
            await _record(etcd, step.name, password)
        case Op.USER_PASSWORD if step.password_secret:
            password = await passwords(step.password_secret)
            await etcd.user_change_password(step.name, password)
            await _record(etcd, step.name, password)
        case Op.USER_ADD:
            await etcd.user_add_without_password(step.name)
        case Op.USER_CLEAR_PASSWORD:
            # Deleted and added again with no password (etcd 3.4+: UserAddOptions.no_password):
            # the one way etcd offers to take a password away; its tokens go with it. Its
            # certificate (CN = name) works again once the plan's next steps granted its roles
            # back. A stop half-way is finished by the next look: a user missing is added (no
            # password, as the spec now says), a record left over takes this step again.
            await etcd.user_delete(step.name)
            await etcd.user_add_without_password(step.name)
            await etcd.delete(record_key(step.name))
        case Op.USER_GRANT:
            await etcd.user_grant_role(step.name, step.role)
        case Op.USER_REVOKE:
            await etcd.user_revoke_role(step.name, step.role)
        case Op.USER_DELETE:
            await etcd.user_delete(step.name)
            await etcd.delete(record_key(step.name))
        case Op.AUTH_ENABLE:
            await etcd.auth_enable()
        case Op.AUTH_DISABLE:
            await etcd.auth_disable()


async def _record(etcd: EtcdClient, user: str, password: str) -> None:
    """What was set, after it was set (actors/auth_passwords.py): a crash in between sets it
    again at the next look. scrypt takes tens of milliseconds: off the event loop."""
    record = await trio.to_thread.run_sync(new_record, password, secrets.token_bytes(16))
    await etcd.put(record_key(user), record.encode())


class ClientAuth(abc.ABC):
    """EtcdAuth's read and apply, for a mode's adapter that says how it opens an etcd client with
    the supervisor's identity and where a user's password comes from."""

    @abc.abstractmethod
    async def _etcd(self, endpoints: Sequence[str]) -> EtcdClient: ...

    @abc.abstractmethod
    async def password(self, secret: str) -> str:
        """The password in the user's passwordSecret; EtcdUnavailable when it cannot be read."""

    async def read(self, endpoints: Sequence[str]) -> AuthState:
        etcd = await self._etcd(endpoints)
        try:
            return await translated(lambda: read_auth(etcd))
        finally:
            await etcd.aclose()

    async def apply(self, endpoints: Sequence[str], step: AuthStep) -> None:
        etcd = await self._etcd(endpoints)
        try:
            await translated(lambda: apply_step(etcd, step, self.password))
        finally:
            await etcd.aclose()

"""Authentication and authorisation: EtcdClient's calls that manage users, roles and their
permissions, and switch auth on and off."""

from __future__ import annotations

from proto.etcd import authpb
from proto.etcd import etcdserverpb as pb

from . import wire
from .client_base import EtcdConnection, retry_if_unapplied
from .errors import AuthenticationFailed, AuthNotEnabled
from .records import PermissionKind


class AuthCalls(EtcdConnection):
    """Users, roles and permissions."""

    # ---- authentication and authorisation

    async def auth_enable(self) -> None:
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).auth_enable(pb.AuthEnableRequest(), timeout=t, metadata=md)
        )

    async def auth_disable(self) -> None:
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).auth_disable(pb.AuthDisableRequest(), timeout=t, metadata=md)
        )

    async def auth_status(self) -> bool:
        """Whether auth is on."""
        response = await self._call(
            lambda ch, md, t: pb.AuthStub(ch).auth_status(pb.AuthStatusRequest(), timeout=t, metadata=md)
        )
        return bool(response.enabled)

    async def auth_status_by_authenticate(self) -> bool:
        """Whether auth is on, asked as etcd 3.4 can be (it has no AuthStatus): Authenticate
        without a name, which etcd refuses "authentication is not enabled" with auth off and
        "authentication failed" with it on. Needs no credentials and changes nothing."""
        request = pb.AuthenticateRequest()
        try:
            await self._call(
                lambda ch, md, t: pb.AuthStub(ch).authenticate(request, timeout=t), authenticated=False
            )
        except AuthNotEnabled:
            return False
        except AuthenticationFailed:
            return True
        return True  # a token: only a cluster with auth on hands one out

    async def user_list(self) -> tuple[str, ...]:
        response = await self._call(
            lambda ch, md, t: pb.AuthStub(ch).user_list(pb.AuthUserListRequest(), timeout=t, metadata=md)
        )
        return tuple(response.users)

    async def role_list(self) -> tuple[str, ...]:
        response = await self._call(
            lambda ch, md, t: pb.AuthStub(ch).role_list(pb.AuthRoleListRequest(), timeout=t, metadata=md)
        )
        return tuple(response.roles)

    async def role_permissions(self, role: str) -> tuple[tuple[PermissionKind, bytes, bytes], ...]:
        """(kind, key, range_end) of each permission the role grants."""
        request = pb.AuthRoleGetRequest(role=role)
        response = await self._call(
            lambda ch, md, t: pb.AuthStub(ch).role_get(request, timeout=t, metadata=md)
        )
        return tuple((PermissionKind(int(p.perm_type)), p.key, p.range_end) for p in response.perm)

    async def role_revoke_permission(self, role: str, key: bytes, range_end: bytes = b"") -> None:
        request = pb.AuthRoleRevokePermissionRequest(role=role, key=key, range_end=range_end)
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).role_revoke_permission(request, timeout=t, metadata=md)
        )

    async def user_revoke_role(self, user: str, role: str) -> None:
        request = pb.AuthUserRevokeRoleRequest(name=user, role=role)
        await self._call(lambda ch, md, t: pb.AuthStub(ch).user_revoke_role(request, timeout=t, metadata=md))

    async def user_add_without_password(self, name: str) -> None:
        """A user who can only authenticate by client certificate (CN = name)."""
        request = pb.AuthUserAddRequest(name=name, options=authpb.UserAddOptions(no_password=True))
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).user_add(request, timeout=t, metadata=md),
            retry=retry_if_unapplied,
        )

    async def user_add(self, name: str, password: str) -> None:
        request = pb.AuthUserAddRequest(name=name, password=password)
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).user_add(request, timeout=t, metadata=md),
            retry=retry_if_unapplied,
        )

    async def user_change_password(self, name: str, password: str) -> None:
        request = pb.AuthUserChangePasswordRequest(name=name, password=password)
        await self._call(  # twice is as once: the same password
            lambda ch, md, t: pb.AuthStub(ch).user_change_password(request, timeout=t, metadata=md)
        )

    async def user_delete(self, name: str) -> None:
        request = pb.AuthUserDeleteRequest(name=name)
        await self._call(lambda ch, md, t: pb.AuthStub(ch).user_delete(request, timeout=t, metadata=md))

    async def user_roles(self, name: str) -> tuple[str, ...]:
        request = pb.AuthUserGetRequest(name=name)
        response = await self._call(
            lambda ch, md, t: pb.AuthStub(ch).user_get(request, timeout=t, metadata=md)
        )
        return tuple(response.roles)

    async def role_add(self, name: str) -> None:
        request = pb.AuthRoleAddRequest(name=name)
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).role_add(request, timeout=t, metadata=md),
            retry=retry_if_unapplied,
        )

    async def role_delete(self, name: str) -> None:
        request = pb.AuthRoleDeleteRequest(role=name)
        await self._call(lambda ch, md, t: pb.AuthStub(ch).role_delete(request, timeout=t, metadata=md))

    async def role_grant_permission(
        self,
        role: str,
        key: bytes,
        range_end: bytes = b"",
        *,
        kind: PermissionKind = PermissionKind.READWRITE,
    ) -> None:
        request = pb.AuthRoleGrantPermissionRequest(name=role, perm=wire.permission(kind, key, range_end))
        await self._call(
            lambda ch, md, t: pb.AuthStub(ch).role_grant_permission(request, timeout=t, metadata=md)
        )

    async def user_grant_role(self, user: str, role: str) -> None:
        request = pb.AuthUserGrantRoleRequest(user=user, role=role)
        await self._call(lambda ch, md, t: pb.AuthStub(ch).user_grant_role(request, timeout=t, metadata=md))

"""Username/password authentication: tokens, refusal without credentials, a changed password,
re-authentication; and whether auth is on, as the supervisor asks a cluster to adopt (spec.adopt)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from actors.errors import AuthRefused
from supervisor.etcd import (
    AuthenticationFailed,
    EtcdError,
    NotAuthenticated,
    PermissionDenied,
    PermissionKind,
    open_etcd_client,
)
from supervisor.etcd.admin import EtcdAdminAdapter
from tests.harness.etcd import EtcdBinaries, running_cluster
from tests.harness.poll import accepted


async def test_auth_enabled_cluster(binaries: EtcdBinaries, tmp_path: Path, asyncio_loop: None) -> None:
    with running_cluster(binaries, tmp_path, size=1) as cluster:
        async with open_etcd_client(cluster.endpoints, credentials=("root", "rootpw")) as admin:
            # Before auth is on, credentials are simply not needed.
            await admin.user_add("root", "rootpw")
            await admin.role_add("root")
            await admin.user_grant_role("root", "root")
            await admin.user_add("reader", "readerpw")
            await admin.role_add("read-app")
            await admin.role_grant_permission("read-app", b"/app/", b"/app0", kind=PermissionKind.READ)
            await admin.user_grant_role("reader", "read-app")
            await admin.auth_enable()
            # The same client authenticates now that it must.
            await admin.put(b"/app/k", b"v")
            assert await admin.user_roles("reader") == ("read-app",)

        async def discard(chunk: bytes) -> None:
            pass

        async with open_etcd_client(cluster.endpoints) as anonymous:
            with pytest.raises(NotAuthenticated):
                await anonymous.get(b"/app/k")
            # The snapshot's own HTTP/2 stream reads etcd's refusal from its trailers.
            with pytest.raises(EtcdError, match="user name is empty"):
                await anonymous.snapshot(discard)

        async with open_etcd_client(cluster.endpoints, credentials=("root", "wrong")) as wrong:
            with pytest.raises(AuthenticationFailed):
                await wrong.get(b"/app/k")

        async with open_etcd_client(cluster.endpoints, credentials=("reader", "readerpw")) as reader:
            assert await reader.get(b"/app/k") == b"v"
            with pytest.raises(PermissionDenied):
                await reader.put(b"/app/k", b"w")

        async with open_etcd_client(cluster.endpoints, credentials=("root", "rootpw")) as root:
            await root.user_change_password("reader", "newpw")
        async with open_etcd_client(cluster.endpoints, credentials=("reader", "readerpw")) as old:
            with pytest.raises(AuthenticationFailed):
                await old.get(b"/app/k")
        async with open_etcd_client(cluster.endpoints, credentials=("reader", "newpw")) as reader:
            assert await reader.get(b"/app/k") == b"v"

        root_login = ("root", "rootpw")
        async with open_etcd_client(cluster.endpoints, credentials=root_login, call_timeout=10) as root:
            assert await root.get(b"/app/k") == b"v"
            assert (await root.snapshot(discard)).verified  # the token travels with it
            # Simple tokens live in the member's memory: a restart invalidates ours.
            await trio.to_thread.run_sync(cluster.members[0].restart)
            await accepted(  # refused while the member is still starting
                lambda: root.put(b"/app/k", b"after-restart"),
                refused=(Exception,),
                fatal=(NotAuthenticated,),  # would mean re-authentication is broken
                within=30,
                every=0.2,
                what="a put after the restart",
            )
            assert await root.get(b"/app/k") == b"after-restart"
            await root.auth_disable()


async def test_whether_auth_is_on_is_told_without_credentials_or_refused(
    binaries: EtcdBinaries, tmp_path: Path, asyncio_loop: None
) -> None:
    """Off is said by every version to anyone (3.4, which has no AuthStatus, through Authenticate).
    On, 3.5 and 3.6 refuse AuthStatus to a client that is not a root user (a refusal, never
    "off"); 3.7 and 3.4 say "on"."""
    with running_cluster(binaries, tmp_path, size=1) as cluster:
        anonymous = EtcdAdminAdapter()
        root = EtcdAdminAdapter(credentials=("root", "rootpw"))
        try:
            assert await anonymous.auth_enabled(cluster.endpoints) is False
            async with open_etcd_client(cluster.endpoints) as etcd:
                await etcd.user_add("root", "rootpw")
                await etcd.role_add("root")
                await etcd.user_grant_role("root", "root")
                await etcd.auth_enable()
            if binaries.minor in ("3.5", "3.6"):  # AuthStatus needs a root user there
                with pytest.raises(AuthRefused, match="user name is empty"):
                    await anonymous.auth_enabled(cluster.endpoints)
            else:  # 3.4 through Authenticate; 3.7 answers AuthStatus to anyone
                assert await anonymous.auth_enabled(cluster.endpoints) is True
            assert await root.auth_enabled(cluster.endpoints) is True
        finally:
            await anonymous.aclose()
            await root.aclose()

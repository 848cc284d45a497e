"""Username/password authentication: tokens, refusal without credentials, re-authentication."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from supervisor.etcd import (
    AuthenticationFailed,
    EtcdError,
    NotAuthenticated,
    PermissionDenied,
    PermissionKind,
    open_etcd_client,
)
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

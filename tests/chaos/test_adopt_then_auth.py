"""spec.adopt with spec.security.auth on, on real etcd processes, locally: a TLS cluster started by
hand without auth is taken over live (its old members removed), and the supervisor then turns
etcd's auth on with the spec's roles and users: a tenant with a password reaches its prefix and
nothing else, and the adopted keys are all there (issue 33's "adoption" with auth on).

It found a promotion that hung once auth was on: the supervisor asked the follower it had used
last, which forwards a promotion to its leader without the caller's identity (etcd issue 20757),
so the third learner of the adoption was never promoted (supervisor/etcd/admin.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.model import (
    AuthSpec,
    ClusterRef,
    ClusterResource,
    ClusterSpec,
    ClusterStatus,
    Permission,
    PermissionType,
    RoleSpec,
    UserSpec,
)
from supervisor.etcd import PermissionDenied, open_etcd_client
from tests.chaos.lifecycle import is_healthy, open_local_supervisor
from tests.chaos.test_auth import PASSWORD_SECRET, set_password
from tests.harness.adoption import PREFIX, adopt_spec, contents, write
from tests.harness.etcd import running_cluster
from tests.harness.etcd_versions import built_or_skip

REF = ClusterRef("default", "demo")
VERSION = ClusterSpec().version
READER = RoleSpec("app-r", (Permission(PermissionType.READ, "/app/", prefix=True),))
APP = UserSpec("app", ("app-r",), password_secret=PASSWORD_SECRET)


def only_new(status: ClusterStatus) -> bool:
    return is_healthy(status, 3) and all(m.name.startswith("demo-") for m in status.members)


async def test_an_adopted_cluster_gets_auth_on_with_the_specs_users_once_its_own(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    with running_cluster(built_or_skip(VERSION), tmp_path / "old", size=3, tls=True, peer_tls=True) as old:
        tls, adopt = adopt_spec(old, secrets)
        set_password(secrets, "app-secret")
        async with open_local_supervisor(tmp_path / "state", secrets_dir=secrets) as sup:
            await write(old.endpoints, tls, 50)
            before = await contents(old.endpoints, tls)
            auth = AuthSpec(enabled=True, users=(APP,), roles=(READER,))
            spec = ClusterSpec(size=3, tls_enabled=True, adopt=adopt, auth=auth)
            demo = ClusterResource(REF, spec)
            await sup.fleet.apply([demo])
            status = await sup.wait_for(REF, only_new, timeout=180)
            urls = [m.client_url for m in status.members]
            events = lambda: [(r, m) for ref, r, m in sup.recorder.events if ref == REF]  # noqa: E731
            await sup.wait_for(REF, lambda s: any("enable auth" in m for r, m in events()), timeout=60)
            # The supervisor's identity (the old clients' certificate, a root user now) reads
            # every adopted key; the tenant, by its password, reads its prefix and only that.
            async with open_etcd_client(urls, tls=tls) as etcd:
                assert await etcd.auth_status()
            assert await contents(urls, tls) == before
            async with open_etcd_client(urls, tls=tls, credentials=("app", "app-secret")) as app:
                assert await app.get(b"/app/config") is None  # allowed, and absent
                with pytest.raises(PermissionDenied):
                    await app.get(PREFIX + b"00000")
                with pytest.raises(PermissionDenied):
                    await app.put(b"/app/config", b"read-only role")

"""spec.security.auth on real etcd processes, locally: the supervisor creates root and its own
user, the spec's roles and users, turns auth on, and writes each user's client certificate; a
tenant's certificate reads and writes its prefix and nothing else; the cluster keeps healing and
scaling with auth on (the supervisor's own identity is a root user); a user dropped from the
spec loses access, a role changed takes effect, and auth turned off lets anyone in again."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import attrs
import pytest
import trio

from actors.model import (
    AuthSpec,
    ClusterResource,
    ClusterStatus,
    Permission,
    PermissionType,
    RoleSpec,
    UserSpec,
)
from supervisor.etcd import (
    AuthenticationFailed,
    NotAuthenticated,
    PermissionDenied,
    TlsFiles,
    open_etcd_client,
)
from tests.chaos.lifecycle import LocalSupervisor, follow_members, is_healthy, open_local_supervisor, resource
from tests.harness.history import KvWorkload, checker_or_skip

RW, READ = PermissionType.READWRITE, PermissionType.READ
APP_RW = RoleSpec("app-rw", (Permission(RW, "/app/", prefix=True),))
APP = UserSpec("app", ("app-rw",), client_cert_secret="app-etcd-client")


def with_auth(demo: ClusterResource, auth: AuthSpec, generation: int, size: int = 3) -> ClusterResource:
    spec = attrs.evolve(demo.spec, tls_enabled=True, auth=auth, size=size)
    return attrs.evolve(demo, spec=spec, generation=generation)


def user_tls(sup: LocalSupervisor, demo: ClusterResource, user: str) -> TlsFiles:
    directory = sup.runtime.layout.cluster(demo.ref).root / "users" / user
    return TlsFiles(directory / "ca.crt", directory / "tls.crt", directory / "tls.key")


def urls(status: ClusterStatus) -> list[str]:
    return [m.client_url for m in status.members]


async def kill_a_follower(sup: LocalSupervisor, demo: ClusterResource, status: ClusterStatus) -> None:
    """SIGKILL a follower's etcd; returns once the supervisor restarted it and all are healthy."""
    victim = next(m for m in status.members if m.role.value == "follower")
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    size = len(status.members)

    def healed(s: ClusterStatus) -> bool:
        return is_healthy(s, size) and next(m for m in s.members if m.name == victim.name).pid != victim.pid

    await sup.wait_for(demo.ref, healed, timeout=60)


async def reconciled(sup: LocalSupervisor, demo: ClusterResource, words: str) -> str:
    """The first AuthReconciled Event whose message has `words`, waited for."""

    def found(_: ClusterStatus) -> bool:
        return any(
            r == demo.ref and reason == "AuthReconciled" and words in m
            for r, reason, m in sup.recorder.events
        )

    await sup.wait_for(demo.ref, found, timeout=60)
    return next(m for r, reason, m in sup.recorder.events if reason == "AuthReconciled" and words in m)


async def test_users_and_roles_from_the_spec_with_auth_on_through_healing_and_scaling(tmp_path: Path) -> None:
    demo = with_auth(resource(size=3), AuthSpec(enabled=True, users=(APP,), roles=(APP_RW,)), 1)
    async with open_local_supervisor(tmp_path / "state") as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        message = await reconciled(sup, demo, "enable auth")
        assert "client certificate issued to app" in message or await reconciled(sup, demo, "issued to app")
        tls = user_tls(sup, demo, "app")

        async with open_etcd_client(urls(status), tls=tls, call_timeout=5) as app:
            await app.put(b"/app/config", b"v1")
            assert await app.get(b"/app/config") == b"v1"
            with pytest.raises(PermissionDenied):
                await app.put(b"/other/x", b"no")
            with pytest.raises(PermissionDenied):
                await app.get(b"/other/x")
        # With auth on, the supervisor still heals a member and grows the cluster.
        await kill_a_follower(sup, demo, status)
        await sup.fleet.apply([with_auth(demo, demo.spec.auth, 2, size=4)])
        status = await sup.wait_healthy(demo.ref, 4, timeout=90)

        # A narrower role takes effect; the user dropped from the spec loses access.
        read_only = RoleSpec("app-rw", (Permission(READ, "/app/", prefix=True),))
        await sup.fleet.apply(
            [with_auth(demo, AuthSpec(enabled=True, users=(APP,), roles=(read_only,)), 3, 4)]
        )
        await reconciled(sup, demo, "grant permission read '/app/'")
        async with open_etcd_client(urls(status), tls=tls, call_timeout=5) as app:
            assert await app.get(b"/app/config") == b"v1"
            with pytest.raises(PermissionDenied):
                await app.put(b"/app/config", b"v2")
        await sup.fleet.apply([with_auth(demo, AuthSpec(enabled=True, roles=(read_only,)), 4, 4)])
        await reconciled(sup, demo, "delete user app")
        async with open_etcd_client(urls(status), tls=tls, call_timeout=5) as gone:
            with pytest.raises((PermissionDenied, AuthenticationFailed, NotAuthenticated)):
                await gone.get(b"/app/config")

        # Auth off: anyone with a certificate of the cluster's CA gets in again.
        await sup.fleet.apply([with_auth(demo, AuthSpec(enabled=False, roles=(read_only,)), 5, 4)])
        await reconciled(sup, demo, "disable auth")
        async with open_etcd_client(urls(status), tls=tls, call_timeout=5) as anyone:
            assert await anyone.get(b"/app/config") == b"v1"


async def test_scaling_and_healing_with_auth_on_under_a_tenants_workload_stay_linearizable(
    tmp_path: Path,
) -> None:
    """The whole membership life with auth on: a tenant whose role reaches only the workload's
    prefix writes and reads through a scale-up, a killed member and a scale-down; porcupine
    checks its history."""
    checker_or_skip()
    tenant_role = RoleSpec("tenant", (Permission(RW, "/linearizability/", prefix=True),))
    tenant = UserSpec("tenant", ("tenant",), client_cert_secret="tenant-etcd-client")
    auth = AuthSpec(enabled=True, users=(tenant,), roles=(tenant_role,))
    demo = with_auth(resource(size=3), auth, 1)
    async with open_local_supervisor(tmp_path / "state") as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        await reconciled(sup, demo, "issued to tenant")
        workload = KvWorkload(
            endpoints=urls(status), tls=user_tls(sup, demo, "tenant"), max_operations=100_000
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            nursery.start_soon(follow_members, sup, demo.ref, workload)
            await workload.wait_for_more(50)
            await sup.fleet.apply([with_auth(demo, auth, 2, size=5)])
            status = await sup.wait_healthy(demo.ref, 5, timeout=90)
            await workload.wait_for_more(50)
            await kill_a_follower(sup, demo, status)
            await workload.wait_for_more(50)
            await sup.fleet.apply([with_auth(demo, auth, 3, size=3)])
            await sup.wait_healthy(demo.ref, 3, timeout=90)
            await workload.wait_for_more(50)
            nursery.cancel_scope.cancel()
    verdict = await workload.check(tmp_path / "history")
    print(f"linearizability: {verdict.operations} operations checked")
    assert verdict.ok, verdict.report
    assert workload.history.count(kind="put", outcome="ok") > 0

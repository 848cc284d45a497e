"""spec.security.auth on real etcd processes, locally: the supervisor creates root and its own
user, the spec's roles and users, turns auth on, and writes each user's client certificate; a
tenant's certificate reads and writes its prefix and nothing else; the cluster keeps healing and
scaling with auth on (the supervisor's own identity is a root user); a user dropped from the
spec loses access, a role changed takes effect, and auth turned off lets anyone in again. A
user's changed password source is applied (the old password refused, the new one taken), and a
restarted supervisor changes no password that did not change (etcd's own count of
UserChangePassword calls) but applies one changed while it was down. A passwordSecret taken out
of the spec takes the password away; the certificate keeps working."""

from __future__ import annotations

import os
import signal
import urllib.request
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
from actors.ports import EtcdAuth
from supervisor.etcd import (
    AuthenticationFailed,
    NotAuthenticated,
    PermissionDenied,
    TlsFiles,
    open_etcd_client,
)
from supervisor.local.layout import read_member
from tests.chaos.lifecycle import LocalSupervisor, follow_members, is_healthy, open_local_supervisor, resource
from tests.harness.history import KvWorkload, checker_or_skip
from tests.harness.poll import eventually

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


PASSWORD_SECRET = "app-etcd-password"


def set_password(secrets: Path, password: str) -> None:
    """The local form of the user's passwordSecret: a file next to the manifest."""
    (secrets / PASSWORD_SECRET).write_text(f"password={password}\n")


async def logs_in(urls: list[str], tls: TlsFiles, password: str) -> bool:
    """Whether etcd takes the password of user app (Authenticate, then a read)."""
    async with open_etcd_client(urls, tls=tls, credentials=("app", password), call_timeout=5) as app:
        try:
            await app.get(b"/app/config")
        except AuthenticationFailed:
            return False
    return True


def change_password_calls(sup: LocalSupervisor, demo: ClusterResource, status: ClusterStatus) -> int:
    """UserChangePassword calls every member received, as etcd counts them (its /metrics)."""
    total = 0.0
    for member in status.members:
        stored = read_member(sup.runtime.layout.member(demo.ref, member.name))
        assert stored is not None and stored.metrics_port is not None
        url = f"http://127.0.0.1:{stored.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            lines = response.read().decode().splitlines()
        total += sum(
            float(line.rsplit(" ", 1)[1])
            for line in lines
            if line.startswith("grpc_server_started_total{") and 'grpc_method="UserChangePassword"' in line
        )
    return int(total)


@attrs.define
class Looks:
    """The supervisor's EtcdAuth, counting the checks of users' certificates: the last thing a
    look of the auth child does, after every step of it."""

    inner: EtcdAuth
    finished: int = 0

    async def read(self, endpoints):
        return await self.inner.read(endpoints)

    async def apply(self, endpoints, step):
        await self.inner.apply(endpoints, step)

    async def password(self, secret):
        return await self.inner.password(secret)

    async def issue_user_certificate(self, user, certificates):
        issued = await self.inner.issue_user_certificate(user, certificates)
        self.finished += 1
        return issued


def with_a_password(tmp_path: Path, password: str) -> tuple[Path, ClusterResource]:
    """(the secrets directory, a 3-member cluster whose user app has a passwordSecret there)."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    set_password(secrets, password)
    app = attrs.evolve(APP, password_secret=PASSWORD_SECRET)
    return secrets, with_auth(resource(size=3), AuthSpec(enabled=True, users=(app,), roles=(APP_RW,)), 1)


def counting_looks(looks: list[Looks]):
    """A wrap for the local Platform: each cluster's EtcdAuth a Looks, appended to `looks`."""

    def watched(platform):
        def auth_for(ref):
            looks.append(Looks(platform.auth_for(ref)))
            return looks[-1]

        return attrs.evolve(platform, auth_for=auth_for)

    return watched


async def test_a_changed_password_is_applied_and_a_restart_changes_none_that_did_not_change(
    tmp_path: Path,
) -> None:
    secrets, demo = with_a_password(tmp_path, "first")
    looks: list[Looks] = []
    watched = counting_looks(looks)

    def supervisor(*, leave_running: bool = True):
        return open_local_supervisor(
            tmp_path / "state", secrets_dir=secrets, wrap=watched, leave_members_running=leave_running
        )

    async with supervisor() as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        await reconciled(sup, demo, "issued to app")
        tls = user_tls(sup, demo, "app")
        assert await logs_in(urls(status), tls, "first")

        set_password(secrets, "second")  # taken at the auth child's next look (LOOK, 30 s)
        assert "change password of user app" in await reconciled(sup, demo, "change password")
        assert await logs_in(urls(status), tls, "second")
        assert not await logs_in(urls(status), tls, "first")
        calls = await trio.to_thread.run_sync(change_password_calls, sup, demo, status)
        assert calls == 1

    # A new supervisor over the running members: the record in etcd says "second" is set.
    async with supervisor() as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        await eventually(lambda: looks[-1].finished, within=60, what="a whole look of the auth child")
        assert await trio.to_thread.run_sync(change_password_calls, sup, demo, status) == calls
        assert not [m for _, reason, m in sup.recorder.events if reason == "AuthReconciled"]

    set_password(secrets, "third")  # while no supervisor runs
    async with supervisor(leave_running=False) as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        await reconciled(sup, demo, "change password of user app")
        assert await logs_in(urls(status), tls, "third")
        assert not await logs_in(urls(status), tls, "second")
        assert await trio.to_thread.run_sync(change_password_calls, sup, demo, status) == calls + 1


async def test_a_password_taken_out_of_the_spec_is_refused_and_the_certificate_still_works(
    tmp_path: Path,
) -> None:
    """passwordSecret removed from a user: the old password is refused, the user's client
    certificate keeps its access (the user is made anew without a password, its roles given
    back), and the record of the password is gone from etcd."""
    secrets, demo = with_a_password(tmp_path, "first")
    looks: list[Looks] = []
    watched = counting_looks(looks)

    async with open_local_supervisor(tmp_path / "state", secrets_dir=secrets, wrap=watched) as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        await reconciled(sup, demo, "issued to app")
        tls = user_tls(sup, demo, "app")
        assert await logs_in(urls(status), tls, "first")
        assert "app" in (await looks[-1].read(urls(status))).password_records

        await sup.fleet.apply([with_auth(demo, AuthSpec(enabled=True, users=(APP,), roles=(APP_RW,)), 2)])
        message = await reconciled(sup, demo, "remove password of user app")
        assert "grant role app-rw of user app" in message, message
        assert not await logs_in(urls(status), tls, "first")
        async with open_etcd_client(urls(status), tls=tls, call_timeout=5) as by_certificate:
            await by_certificate.put(b"/app/config", b"v2")
            assert await by_certificate.get(b"/app/config") == b"v2"
            with pytest.raises(PermissionDenied):
                await by_certificate.get(b"/other/x")
        state = await looks[-1].read(urls(status))
        assert "app" not in state.password_records
        assert state.users["app"] >= {"app-rw"}

"""The auth child on the autojump clock, with etcd's auth store in memory: it reads every user and
role once the cluster has quorum, takes the steps, and then reads again only when what is wanted
changes or LOOK has passed — not at every look of the cluster actor (a tick), which would cost two
etcd calls per user and role each second on a cluster with many. A cluster that neither wants
nor uses auth is read at the start, after a look that failed and when its spec changes, never
every LOOK."""

from __future__ import annotations

import attrs
import trio

from actors.auth_actor import LOOK
from actors.auth_plan import MANAGED, ROOT, SUPERVISOR, AuthState, AuthStep, Op
from actors.errors import EtcdUnavailable
from actors.model import AuthSpec, ClusterResource, ClusterSpec, RoleSpec, UserSpec
from actors.platform import open_supervisor
from tests.actors.world import REF, TIMING, MemoryWorld, platform


@attrs.define
class MemoryAuth:
    """etcd's auth store in memory (actors.ports.EtcdAuth), counting reads."""

    users: dict[str, set[str]] = attrs.field(factory=dict)
    roles: dict[str, set] = attrs.field(factory=dict)
    enabled: bool = False
    reads: int = 0
    failures: int = 0  # reads refused before one goes through

    async def read(self, endpoints):
        self.reads += 1
        if self.failures:
            self.failures -= 1
            raise EtcdUnavailable("no endpoint answered")
        return AuthState(
            self.enabled,
            {k: frozenset(v) for k, v in self.users.items()},
            {k: frozenset(v) for k, v in self.roles.items()},
        )

    async def apply(self, endpoints, step: AuthStep):
        match step.op:
            case Op.ROLE_ADD:
                self.roles[step.name] = set()
            case Op.ROLE_GRANT:
                self.roles[step.name].add(step.grant)
            case Op.USER_ADD:
                self.users[step.name] = set()
            case Op.USER_GRANT:
                self.users[step.name].add(step.role)
            case Op.AUTH_ENABLE:
                self.enabled = True
            case Op.AUTH_DISABLE:
                self.enabled = False
            case Op.USER_DELETE:
                del self.users[step.name]
            case Op.ROLE_DELETE:
                del self.roles[step.name]
                for held in self.users.values():
                    held.discard(step.name)

    async def issue_user_certificate(self, user, certificates):
        return False


def spec(*users: str) -> ClusterSpec:
    auth = AuthSpec(enabled=True, users=tuple(UserSpec(u, ("r",)) for u in users), roles=(RoleSpec("r"),))
    return ClusterSpec(size=3, tls_enabled=False, auth=auth)


async def test_etcd_is_read_again_on_a_change_of_the_spec_or_after_look_not_at_every_tick(autojump_clock):
    world, auth = MemoryWorld(), MemoryAuth()
    with_auth = attrs.evolve(platform(world), auth_for=lambda ref: auth)
    async with open_supervisor(with_auth, timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, spec("app"))])
        await trio.sleep(LOOK - 5)  # some 20 ticks of the cluster actor
        assert auth.enabled and "app" in auth.users
        settled = auth.reads
        assert settled == 1  # the look that took the steps (earlier ones found no quorum, read nothing)
        await fleet.apply([ClusterResource(REF, spec("app", "ops"), generation=2)])
        await trio.sleep(2)
        assert "ops" in auth.users and auth.reads == settled + 1  # the change: one look
        await trio.sleep(LOOK)
        assert auth.reads == settled + 2  # and one more after LOOK


async def test_a_cluster_without_auth_is_read_at_the_start_and_after_a_failure_then_only_on_a_change(
    autojump_clock,
):
    world, auth = MemoryWorld(), MemoryAuth(failures=1)
    with_auth = attrs.evolve(platform(world), auth_for=lambda ref: auth)
    async with open_supervisor(with_auth, timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=3, tls_enabled=False))])
        await trio.sleep(LOOK - 5)
        assert auth.reads == 2  # the first look refused, the next one found auth unused
        await trio.sleep(4 * LOOK)
        assert auth.reads == 2  # and no more: nothing to keep
        await fleet.apply([ClusterResource(REF, spec("app"), generation=2)])
        await trio.sleep(2)
        assert auth.enabled and "app" in auth.users and auth.reads == 3  # the change: one look
        await trio.sleep(LOOK)
        assert auth.reads == 4  # auth in use: looked at every LOOK again


async def test_auth_dropped_from_the_spec_is_cleaned_up_at_the_start_then_left_alone(autojump_clock):
    world = MemoryWorld()
    auth = MemoryAuth(
        users={ROOT: {ROOT}, SUPERVISOR: {ROOT, "r"}, "app": {"r", MANAGED}},
        roles={ROOT: set(), MANAGED: set(), "r": set()},
        enabled=True,
    )
    with_auth = attrs.evolve(platform(world), auth_for=lambda ref: auth)
    async with open_supervisor(with_auth, timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=3, tls_enabled=False))])
        await trio.sleep(LOOK - 5)
        assert not auth.enabled and "app" not in auth.users and "r" not in auth.roles
        assert auth.reads == 1
        await trio.sleep(LOOK)
        assert auth.reads == 2  # the look after LOOK finds it unused
        await trio.sleep(4 * LOOK)
        assert auth.reads == 2

"""The cluster actor's timing, on trio's autojump clock with in-memory ports (no real I/O here:
everything that touches etcd is tested against real etcd in tests/chaos and tests/etcd)."""

import attrs
import pytest
import trio
import trio.testing

from actors.cluster import ClusterPorts, Timing
from actors.errors import ClusterUnhealthy, EtcdUnavailable
from actors.fleet import Fleet
from actors.model import (
    ClusterRef,
    ClusterResource,
    ClusterSpec,
    EtcdMember,
    MemberHealth,
    MemberUrls,
    ProcessState,
    RuntimeMember,
)
from supervisor.runtime import Supervisor

REF = ClusterRef("default", "demo")
TIMING = Timing(tick=1.0, call_timeout=1.0, probe_timeout=0.5, health_ttl=3.0)


@pytest.fixture
def autojump_clock():
    return trio.testing.MockClock(autojump_threshold=0)


@attrs.define
class MemoryWorld:
    """Runtime and etcd in one: a member started is at once running, healthy and caught up."""

    refuse_adds: int = 0
    answers_after: float = 0.0  # a started member serves only this long after its start
    started_at: dict[str, float] = attrs.field(factory=dict)
    add_attempts: list[float] = attrs.field(factory=list)
    runtime: dict[str, RuntimeMember] = attrs.field(factory=dict)
    etcd: dict[int, EtcdMember] = attrs.field(factory=dict)
    statuses: list = attrs.field(factory=list)
    subscribers: int = 0
    crash_observations: int = 0

    # MemberRuntime
    async def list_members(self, cluster):
        if self.crash_observations:
            self.crash_observations -= 1
            raise RuntimeError("injected crash in the cluster actor")
        return list(self.runtime.values())

    async def allocate_member(self, cluster, name):
        urls = MemberUrls(f"peer://{name}", f"client://{name}")
        self.runtime[name] = RuntimeMember(name, urls, ProcessState.ABSENT, False)
        return urls

    async def start_member(self, launch):
        self.started_at[launch.name] = trio.current_time()
        self.runtime[launch.name] = RuntimeMember(launch.name, launch.urls, ProcessState.RUNNING, True)
        if launch.initial_cluster_state == "new":
            self.etcd[1] = EtcdMember(
                1, launch.name, (launch.urls.peer_url,), (launch.urls.client_url,), False
            )
        for m in list(self.etcd.values()):
            if m.peer_urls == (launch.urls.peer_url,):
                self.etcd[m.id] = attrs.evolve(m, name=launch.name, client_urls=(launch.urls.client_url,))

    async def delete_member(self, cluster, name):
        self.runtime.pop(name, None)

    async def delete_cluster(self, cluster, *, keep_data):
        self.runtime.clear()

    def watch_members(self, cluster, on_change):
        self.subscribers += 1

        def unsubscribe():
            self.subscribers -= 1

        return unsubscribe

    # EtcdAdmin
    async def member_list(self, endpoints):
        return list(self.etcd.values())

    async def add_learner(self, endpoints, peer_url):
        self.add_attempts.append(trio.current_time())
        if len(self.add_attempts) <= self.refuse_adds:
            raise ClusterUnhealthy("etcdserver: unhealthy cluster")
        member = EtcdMember(len(self.etcd) + 1, "", (peer_url,), (), True)
        self.etcd[member.id] = member
        return member

    async def promote(self, endpoints, member_id):
        self.etcd[member_id] = attrs.evolve(self.etcd[member_id], is_learner=False)

    async def member_health(self, client_url):
        me = next(m for m in self.etcd.values() if client_url in m.client_urls)
        if trio.current_time() < self.started_at[me.name] + self.answers_after:
            raise EtcdUnavailable("connection refused")
        return MemberHealth(me.id, 1, 10, 10, me.is_learner, 1)

    # StatusSink / EventSink
    async def publish(self, cluster, status):
        self.statuses.append((trio.current_time(), status))

    async def record(self, cluster, *, reason, message, warning=False):
        pass


async def run_fleet(world: MemoryWorld, size: int, seconds: float) -> None:
    root = Supervisor("root")
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        fleet = Fleet(root, lambda r: ClusterPorts(world, world, world, world), timing=TIMING)
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=size, tls_enabled=False))])
        await trio.sleep(seconds)
        nursery.cancel_scope.cancel()


async def test_a_refused_member_add_is_retried_after_doubling_hold_offs(autojump_clock):
    world = MemoryWorld(refuse_adds=7)
    await run_fleet(world, size=2, seconds=60)
    first = world.add_attempts[0]
    gaps = [round(b - a, 6) for a, b in zip(world.add_attempts, world.add_attempts[1:], strict=False)]
    # Holds of one tick five times, then 2 and 4 ticks; each retry comes with the first
    # health tick after its hold ends.
    holds = [1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 4.0]
    assert len(world.add_attempts) == 8
    assert all(h <= g <= h + TIMING.tick for g, h in zip(gaps, holds, strict=True)), gaps
    assert first < 5
    final = world.statuses[-1][1]
    assert final.phase.value == "Running" and final.ready_replicas == 2


async def test_a_steady_cluster_publishes_once_not_on_every_tick(autojump_clock):
    world = MemoryWorld()
    await run_fleet(world, size=1, seconds=30)
    running = [t for t, s in world.statuses if s.phase.value == "Running"]
    # Thirty ticks of unchanged facts: the status was written when it changed, then never again.
    assert len(running) == 1


async def test_a_crashing_cluster_actor_leaks_no_runtime_subscription(autojump_clock):
    world = MemoryWorld(crash_observations=5)
    root = Supervisor("root")
    async with trio.open_nursery() as nursery:
        await nursery.start(root.run)
        fleet = Fleet(root, lambda r: ClusterPorts(world, world, world, world), timing=TIMING)
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=1, tls_enabled=False))])
        await trio.sleep(60)
        assert world.crash_observations == 0  # every injected crash happened
        assert world.statuses[-1][1].phase.value == "Running"
        assert world.subscribers == 1
        await fleet.apply([])  # tearing the cluster down ends its subscription too
        assert world.subscribers == 0
        nursery.cancel_scope.cancel()


async def test_a_just_started_member_is_probed_eagerly_so_bootstrap_does_not_wait_for_ticks(autojump_clock):
    world = MemoryWorld(answers_after=0.25)
    await run_fleet(world, size=3, seconds=10)
    formed = next(t for t, s in world.statuses if s.phase.value == "Running" and s.ready_replicas == 3)
    # Each of the three members is heard from within one eager interval of serving, and the
    # next step follows at once: about 3 x 0.3 s. Waiting for health ticks instead, each stage
    # would take a whole tick.
    assert formed < 3 * (world.answers_after + TIMING.eager_probe_interval) + 0.01, formed
    assert [round(t, 6) for t in world.started_at.values()] == [0.0, 0.3, 0.6]

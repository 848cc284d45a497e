"""In-memory ports for the actor tests: runtime and etcd in one, answering at once.

No real I/O here: everything that touches etcd is tested against real etcd in tests/chaos,
tests/local and tests/etcd. Used with trio's autojump clock.
"""

import collections

import attrs
import trio

from actors.cluster_context import Timing
from actors.errors import ClusterUnhealthy, EtcdUnavailable, NamespaceTerminating
from actors.model import (
    ClusterRef,
    ClusterResource,
    ClusterSpec,
    EtcdMember,
    MemberConfig,
    MemberHealth,
    MemberUrls,
    ProcessState,
    RuntimeMember,
)
from actors.platform import Platform, open_supervisor

REF = ClusterRef("default", "demo")
TIMING = Timing(tick=1.0, call_timeout=1.0, probe_timeout=0.5, health_ttl=3.0)


@attrs.define
class MemoryWorld:
    """Runtime and etcd in one: a member started is at once running, healthy and caught up."""

    refuse_adds: int = 0
    namespace_deleted: bool = False  # the runtime refuses every start: its namespace is going
    answers_after: float = 0.0  # a started member serves only this long after its start
    list_delay: float = 0.0  # a listing of the runtime takes this long (an API server's lists)
    hung: set = attrs.field(factory=set)  # members that run but answer nothing
    # Members that, once started, answer nothing until an entry is committed (etcd 3.6's
    # publish stuck behind a snapshot: actors/publish_nudge.py).
    stuck_publish: set = attrs.field(factory=set)
    empty_entries: list = attrs.field(factory=list)  # when each empty entry was committed
    # Something outside removes each new learner from etcd as soon as its member starts.
    removes_learners: bool = False
    stops: list = attrs.field(factory=list)
    started_at: dict[str, float] = attrs.field(factory=dict)
    add_attempts: list[float] = attrs.field(factory=list)
    runtime: dict[str, RuntimeMember] = attrs.field(factory=dict)
    etcd: dict[int, EtcdMember] = attrs.field(factory=dict)
    statuses: list = attrs.field(factory=list)
    subscribers: int = 0
    crash_observations: int = 0
    calls: collections.Counter = attrs.field(factory=collections.Counter)
    closed: int = 0
    events: list = attrs.field(factory=list)

    # MemberRuntime
    async def list_members(self, cluster):
        self.calls["list_members"] += 1
        listed = list(self.runtime.values())
        if self.list_delay:
            # Only when asked for: a checkpoint here reorders, on the autojump clock, a tick's
            # probes and a step due at the same virtual instant, which real clocks never tie.
            await trio.sleep(self.list_delay)
        if self.crash_observations:
            self.crash_observations -= 1
            raise RuntimeError("injected crash in the cluster actor")
        return listed

    async def allocate_member(self, cluster, name, spec):
        urls = MemberUrls(f"peer://{name}", f"client://{name}")
        self.runtime[name] = RuntimeMember(name, urls, ProcessState.ABSENT, False)
        return urls

    async def start_member(self, launch):
        if self.namespace_deleted:
            self.calls["refused_start"] += 1
            raise NamespaceTerminating(f'403 Forbidden: pods "{launch.name}" is forbidden: being terminated')
        self.started_at[launch.name] = trio.current_time()
        config = self.member_config(launch.spec).fingerprint
        self.runtime[launch.name] = RuntimeMember(
            launch.name, launch.urls, ProcessState.RUNNING, True, config=config
        )
        if launch.force_new_cluster:  # alone on its data: etcd forgets every other member
            self.etcd = {m.id: m for m in self.etcd.values() if m.peer_urls == (launch.urls.peer_url,)}
        if launch.initial_cluster_state == "new":
            self.etcd[1] = EtcdMember(
                1, launch.name, (launch.urls.peer_url,), (launch.urls.client_url,), False
            )
        for m in list(self.etcd.values()):
            if m.peer_urls == (launch.urls.peer_url,):
                self.etcd[m.id] = attrs.evolve(m, name=launch.name, client_urls=(launch.urls.client_url,))
                if self.removes_learners and m.is_learner:
                    del self.etcd[m.id]

    async def stop_member(self, cluster, name):
        self.stops.append((trio.current_time(), name))

    async def delete_member(self, cluster, name):
        self.runtime.pop(name, None)

    async def delete_cluster(self, cluster, *, keep_data):
        self.runtime.clear()

    def member_config(self, spec):
        return MemberConfig(f"etcd {spec.version}")

    def watch_members(self, cluster, on_change):
        self.subscribers += 1

        def unsubscribe():
            self.subscribers -= 1

        return unsubscribe

    # EtcdAdmin
    async def member_list(self, endpoints):
        self.calls["member_list"] += 1
        return list(self.etcd.values())

    async def add_learner(self, endpoints, peer_url):
        self.add_attempts.append(trio.current_time())
        if len(self.add_attempts) <= self.refuse_adds:
            raise ClusterUnhealthy("etcdserver: unhealthy cluster")
        member = EtcdMember(max(self.etcd, default=0) + 1, "", (peer_url,), (), True)
        self.etcd[member.id] = member
        return member

    async def promote(self, endpoints, member_id):
        self.etcd[member_id] = attrs.evolve(self.etcd[member_id], is_learner=False)

    async def remove(self, endpoints, member_id):
        self.etcd.pop(member_id, None)

    async def append_empty_entry(self, endpoints):
        self.empty_entries.append(trio.current_time())
        self.stuck_publish -= set(self.started_at)  # a member started applies the new entry

    async def aclose(self):
        self.closed += 1

    async def member_health(self, client_url):
        self.calls["member_health"] += 1
        me = next((m for m in self.etcd.values() if client_url in m.client_urls), None)
        if me is None:
            raise EtcdUnavailable("no such member")
        exited = self.runtime[me.name].state is not ProcessState.RUNNING
        too_soon = trio.current_time() < self.started_at[me.name] + self.answers_after
        if exited or me.name in self.hung or me.name in self.stuck_publish or too_soon:
            raise EtcdUnavailable("connection refused")
        return MemberHealth(me.id, 1, 10, 10, me.is_learner, 1)

    # StatusSink / EventSink
    async def publish(self, cluster, status):
        self.statuses.append((trio.current_time(), status))

    async def record(self, cluster, *, reason, message, warning=False, measured=None):
        self.events.append((trio.current_time(), reason, message))


def platform(world: MemoryWorld) -> Platform:
    """The world as a mode's Platform: what the daemon and the operator wire, in memory."""
    return Platform(world, world, world, lambda resource: world)


async def run_fleet(world: MemoryWorld, size: int, seconds: float, **fleet_options) -> None:
    async with open_supervisor(platform(world), timing=TIMING, **fleet_options) as fleet:
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=size, tls_enabled=False))])
        await trio.sleep(seconds)

"""A rolling restart on the autojump clock, where probe answers take time to come back and a
restarted member takes time to serve: each step is decided on answers asked after the previous
one ended, so no two members are ever down at once and leadership moves once."""

import attrs
import trio

from actors.errors import EtcdUnavailable
from actors.model import ClusterResource, ClusterSpec
from actors.platform import open_supervisor
from tests.actors.world import REF, TIMING, MemoryWorld, platform


@attrs.define
class RollingWorld(MemoryWorld):
    """Members whose answer is read when asked and delivered `in_flight` later (a probe of the
    old process lands after its restart), that serve `answers_after` a (re)start, and whose
    runtime shows no new process id (a pod's), so only the steps tell a restart."""

    leader: int = 1
    in_flight: float = 0.3
    down: list = attrs.field(factory=list)  # (name, stopped at, serving again at)

    async def member_health(self, client_url):
        try:
            answer = await super().member_health(client_url)
        except EtcdUnavailable:
            await trio.sleep(self.in_flight)
            raise
        await trio.sleep(self.in_flight)
        return attrs.evolve(answer, leader_id=self.leader)

    async def stop_member(self, cluster, name):
        await super().stop_member(cluster, name)
        stopped = trio.current_time()
        self.down.append((name, stopped, stopped + self.answers_after))
        me = next(m for m in self.etcd.values() if m.name == name)
        if me.id == self.leader:  # the cluster elects another
            self.leader = next(m.id for m in self.etcd.values() if m.id != me.id)

    async def move_leader(self, endpoints, target_id):
        await trio.sleep(0.1)  # an election's worth
        self.leader = target_id  # etcd accepts a move to the leader it has: a no-op


async def test_a_rollout_waits_for_answers_asked_after_each_step(autojump_clock):
    world = RollingWorld()
    async with open_supervisor(platform(world), timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=3, version="3.5.34", tls_enabled=False))])
        await trio.sleep(30)
        assert sorted(m.config for m in world.runtime.values()) == ["etcd 3.5.34"] * 3
        world.answers_after = 2.0  # from now on a restarted member serves after 2 s
        start = len(world.events)
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=3, version="3.5.35", tls_enabled=False), 2)])
        await trio.sleep(60)
    assert sorted(m.config for m in world.runtime.values()) == ["etcd 3.5.35"] * 3
    reasons = [reason for _, reason, _ in world.events[start:]]
    assert reasons.count("MemberRolled") == 3 and reasons.count("LeaderMoved") == 1, reasons
    # One member down at a time: each restart began after the previous one served again.
    assert len(world.down) == 3
    for (_, _, served), (name, stopped, _) in zip(world.down, world.down[1:], strict=False):
        assert stopped >= served, (name, world.down)

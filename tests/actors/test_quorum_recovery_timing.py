"""Quorum-loss recovery's bound on the autojump clock: a silent majority is waited for (and
returns by itself), and only once it has answered nothing for the whole bound is the cluster
rebuilt from the survivor, once, then grown back."""

import trio
import trio.testing

from actors.model import ClusterResource, ClusterSpec, DisasterRecoverySpec, RecoveryMode
from actors.plan.recovery import RECOVERY_BOUND_MINIMUM
from actors.platform import open_supervisor
from tests.actors.world import REF, TIMING, MemoryWorld, platform

AUTOMATIC = ClusterSpec(
    size=3, tls_enabled=False, disaster_recovery=DisasterRecoverySpec(RecoveryMode.AUTOMATIC)
)


def recoveries(world):
    return [t for t, reason, _ in world.events if reason.startswith("QuorumRecovered")]


async def test_a_silent_majority_is_waited_for_until_the_bound_then_rebuilt_from_the_survivor(autojump_clock):
    world = MemoryWorld()
    async with open_supervisor(platform(world), timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, AUTOMATIC)])
        await trio.sleep(30)
        assert world.statuses[-1][1].ready_replicas == 3
        # A majority frozen for most of the bound: restarted (it stays silent), never rebuilt,
        # and back in the cluster when it answers again.
        world.hung = {"demo-0", "demo-1"}
        await trio.sleep(RECOVERY_BOUND_MINIMUM - 60)
        assert recoveries(world) == [] and world.statuses[-1][1].phase.value == "Failed"
        world.hung = set()
        await trio.sleep(30)
        status = world.statuses[-1][1]
        assert status.phase.value == "Running" and {m.name for m in status.members} == {
            "demo-0",
            "demo-1",
            "demo-2",
        }
        # Frozen again, past the bound: one recovery from the survivor, then learners.
        frozen_at = trio.current_time()
        world.hung = {"demo-0", "demo-1"}
        await trio.sleep(RECOVERY_BOUND_MINIMUM + 60)
    (at,) = recoveries(world)
    # Silence counts from the last answer, at most a probe interval before the freeze.
    waited = at - frozen_at
    assert RECOVERY_BOUND_MINIMUM - 2 * TIMING.tick <= waited <= RECOVERY_BOUND_MINIMUM + 2 * TIMING.tick
    final = world.statuses[-1][1]
    assert final.phase.value == "Running" and final.ready_replicas == 3
    assert final.last_recovery is not None and final.last_recovery.source == "demo-2"
    assert {m.name for m in final.members} == {"demo-2", "demo-3", "demo-4"}


async def test_a_cluster_left_with_no_member_at_all_is_not_seeded_afresh(autojump_clock):
    """Every member's pod and volume deleted (the runtime lists nothing), and the cluster actor
    restarted meanwhile, so only the status it wrote (as Kubernetes hands it back with the
    resource) says the cluster had members: nothing is started, the status says what was lost."""
    world = MemoryWorld()
    manual = ClusterSpec(size=3, tls_enabled=False)
    async with open_supervisor(platform(world), timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, manual)])
        await trio.sleep(30)
        assert world.statuses[-1][1].ready_replicas == 3
        await fleet.apply([ClusterResource(REF, manual, recorded_members=("demo-0", "demo-1", "demo-2"))])
        # The status comes back on every write: it is noted, not taken for a spec change.
        await fleet.apply([ClusterResource(REF, manual)])
        await trio.sleep(5)
        started = dict(world.started_at)
        world.runtime.clear()
        world.etcd.clear()
        world.crash_observations = 1
        await trio.sleep(30)
    assert world.started_at == started, "a member was started: the cluster was seeded afresh"
    status = world.statuses[-1][1]
    assert "every member lost its data" in status.message and "no member, pod or volume" in status.message

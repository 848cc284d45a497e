"""The cluster actor's timing, on trio's autojump clock with in-memory ports (tests/actors/world.py)."""

import itertools

import trio
import trio.testing

from actors.model import ClusterResource, ClusterSpec
from actors.platform import open_supervisor
from tests.actors.world import REF, TIMING, MemoryWorld, platform, run_fleet


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
    async with open_supervisor(platform(world), timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=1, tls_enabled=False))])
        await trio.sleep(60)
        assert world.crash_observations == 0  # every injected crash happened
        assert world.statuses[-1][1].phase.value == "Running"
        assert world.subscribers == 1
        await fleet.apply([])  # tearing the cluster down ends its subscription too
        assert world.subscribers == 0


async def test_a_just_started_member_is_probed_eagerly_so_bootstrap_does_not_wait_for_ticks(autojump_clock):
    world = MemoryWorld(answers_after=0.25)
    await run_fleet(world, size=3, seconds=10)
    formed = next(t for t, s in world.statuses if s.phase.value == "Running" and s.ready_replicas == 3)
    # Each of the three members is heard from within one eager interval of serving, and the
    # next step follows at once: about 3 x 0.3 s. Waiting for health ticks instead, each stage
    # would take a whole tick.
    assert formed < 3 * (world.answers_after + TIMING.eager_probe_interval) + 0.01, formed
    starts = sorted(world.started_at.values())
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert len(starts) == 3 and starts[0] == 0.0
    assert all(
        world.answers_after <= g <= world.answers_after + TIMING.eager_probe_interval + 1e-9 for g in gaps
    ), starts


async def test_a_learner_answering_while_the_runtime_is_being_listed_is_promoted_without_waiting_for_a_tick(
    autojump_clock,
):
    # Listing pods takes the API server a while, and a learner in a pod made ahead answers at
    # once: its first answer, asked while the listing that first shows it runs, is its own.
    # Refused, each learner would wait for the next health tick (1 s) to be asked again.
    world = MemoryWorld(list_delay=0.05)
    await run_fleet(world, size=3, seconds=10)
    formed = next(t for t, s in world.statuses if s.phase.value == "Running" and s.ready_replicas == 3)
    assert formed < TIMING.tick, formed


async def test_a_member_that_keeps_vanishing_from_etcd_is_replaced_with_backoff_and_says_why(autojump_clock):
    """Something outside removes each new learner: each is deleted as a leftover and another
    added, but after backoff doubling up to a minute, as a crash loop is restarted (issue 28:
    38 pods in two minutes without), and the status names the member and why."""
    # Each listing takes 50 ms of the virtual clock: without a backoff the loop would add a
    # member every few of them rather than never letting the clock move.
    world = MemoryWorld(removes_learners=True, list_delay=0.05)
    await run_fleet(world, size=2, seconds=120)
    # Delays 0, 1, 2, 4, 8, 16, 32, 60 s (plus a tick each): at most 9 adds in two minutes.
    assert 5 <= len(world.add_attempts) <= 9, world.add_attempts
    message = world.statuses[-1][1].message
    assert "vanished from etcd's membership" in message and "times in a row" in message, message

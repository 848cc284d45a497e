"""The publish nudge (actors/publish_nudge.py) on the autojump clock, in-memory ports: a learner
whose publish is stuck behind a snapshot is freed by an empty entry within seconds, not
restarted after unresponsiveAfter; a cluster with nothing stuck commits no such entry."""

import itertools

import trio

from actors.model import ClusterResource, ClusterSpec, HealthSpec
from actors.platform import open_supervisor
from actors.publish_nudge import NUDGE_AFTER, NUDGE_EVERY
from tests.actors.world import REF, TIMING, MemoryWorld, platform

SPEC = ClusterSpec(size=3, tls_enabled=False, health=HealthSpec(unresponsive_after="30s"))


async def test_a_learner_stuck_on_its_publish_is_freed_by_an_empty_entry_not_restarted(autojump_clock):
    world = MemoryWorld()
    async with open_supervisor(platform(world), timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, SPEC)])
        await trio.sleep(10)
        assert world.statuses[-1][1].ready_replicas == 3
        await trio.sleep(30)
        assert world.empty_entries == []  # nothing stuck, nothing committed

        world.stuck_publish.add("demo-3")
        scaled_at = trio.current_time()
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=4, tls_enabled=False, health=SPEC.health))])
        await trio.sleep(40)
    final = world.statuses[-1][1]
    assert final.ready_replicas == 4 and "demo-3" in {m.name for m in final.members}
    # One entry, once the learner had been silent NUDGE_AFTER (probes every tick), and none
    # after it answered.
    started = world.started_at["demo-3"]
    (entry,) = world.empty_entries
    assert NUDGE_AFTER <= entry - started <= NUDGE_AFTER + 2 * TIMING.tick
    reasons = [reason for t, reason, _ in world.events if t >= scaled_at]
    assert "MemberRestarted" not in reasons and reasons.count("LearnerPromoted") == 1


async def test_a_learner_that_stays_silent_is_nudged_every_few_seconds_until_it_is_restarted(autojump_clock):
    world = MemoryWorld()
    async with open_supervisor(platform(world), timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, SPEC)])
        await trio.sleep(10)
        world.hung.add("demo-3")  # answers nothing, entries or not
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=4, tls_enabled=False, health=SPEC.health))])
        await trio.sleep(25)
        started = world.started_at["demo-3"]
        entries = [t - started for t in world.empty_entries]
        # Every NUDGE_EVERY (or the next tick after it) from NUDGE_AFTER on.
        assert entries and NUDGE_AFTER <= entries[0] <= NUDGE_AFTER + 2 * TIMING.tick
        gaps = [b - a for a, b in itertools.pairwise(entries)]
        assert gaps and all(NUDGE_EVERY <= g <= NUDGE_EVERY + TIMING.tick for g in gaps)
        await trio.sleep(15)
    # unresponsiveAfter (30 s) restarted it, the unresponsive planner's step as ever; the
    # restarted process's silence counts afresh (no entry in its first NUDGE_AFTER).
    (restart, *_) = [t for t, reason, _ in world.events if reason == "MemberRestarted"]
    assert 30 <= restart - started <= 30 + 2 * TIMING.tick
    assert not [t for t in world.empty_entries if restart <= t < restart + NUDGE_AFTER]

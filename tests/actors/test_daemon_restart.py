"""A daemon restarted over a running cluster adopts its members: until they answered, they are
not yet heard from, never down. An alert on Failed must not fire on every restart.
Autojump clock, in-memory ports."""

from actors.model import Phase
from tests.actors.world import TIMING, MemoryWorld, run_fleet


def said_failed(world: MemoryWorld) -> list[str]:
    phases = [f"status {status.phase.value}: {status.message}" for _, status in world.statuses]
    events = [f"{reason}: {message}" for _, reason, message in world.events]
    return [line for line in phases + events if "Failed" in line]


async def restarted(world: MemoryWorld, *, seconds: float = 10) -> None:
    """Form a three-member cluster, stop the fleet (members keep running), start a new one."""
    await run_fleet(world, size=3, seconds=10)
    assert world.statuses[-1][1].phase is Phase.RUNNING and world.statuses[-1][1].ready_replicas == 3
    world.statuses.clear()
    world.events.clear()
    await run_fleet(world, size=3, seconds=seconds)


async def test_a_restarted_fleet_over_a_healthy_cluster_never_says_failed(autojump_clock):
    world = MemoryWorld()
    await restarted(world)
    assert said_failed(world) == []
    # Nothing is published before every member was heard from: the status on record stands,
    # then the new actor's first status is the cluster as it is.
    assert [(s.phase, s.ready_replicas, s.message) for _, s in world.statuses] == [
        (Phase.RUNNING, 3, "3 of 3 members healthy")
    ]
    assert world.events == []


async def test_a_member_silent_at_the_restart_costs_no_failed_phase_while_quorum_holds(autojump_clock):
    world = MemoryWorld()
    await run_fleet(world, size=3, seconds=10)
    world.hung.add("demo-1")  # its probes time out; the other two answer at once
    world.statuses.clear()
    world.events.clear()
    await run_fleet(world, size=3, seconds=8)
    assert said_failed(world) == []
    assert {status.phase for _, status in world.statuses} == {Phase.RUNNING}
    first = world.statuses[0][1]
    assert first.ready_replicas == 2 and [m.name for m in first.members if not m.healthy] == ["demo-1"]


async def test_a_cluster_found_dead_at_the_restart_is_failed_once_its_members_were_asked(autojump_clock):
    world = MemoryWorld()
    await run_fleet(world, size=3, seconds=10)
    world.hung.update({"demo-0", "demo-1", "demo-2"})
    world.statuses.clear()
    await run_fleet(world, size=3, seconds=10)
    # Nothing said until every member was asked (for the eager window), then: lost, at once.
    assert {status.phase for _, status in world.statuses} == {Phase.FAILED}
    assert world.statuses[0][0] <= 10 + TIMING.eager_window + TIMING.probe_timeout
    assert world.statuses[0][1].message.startswith("quorum lost: 0 of 3")

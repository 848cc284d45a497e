"""The shape later capabilities plug into: one class per action, planners, per-cluster children,
ports with lifetimes, and one observation per tick. Autojump clock, in-memory ports."""

import itertools
from typing import ClassVar

import attrs
import trio
import trio.testing

from actors.actions import Action, ActionContext, Outcome, Wait
from actors.cluster_context import ClusterContext
from actors.model import ClusterResource, ClusterSpec, HealthSpec
from actors.plan import PLANNERS
from actors.platform import open_supervisor
from supervisor.runtime import ChildSpec
from tests.actors.world import REF, TIMING, MemoryWorld, platform, run_fleet


async def test_a_steady_cluster_is_observed_once_per_tick(autojump_clock):
    world = MemoryWorld()
    async with open_supervisor(platform(world), timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=5, tls_enabled=False))])
        await trio.sleep(20.5)  # formed well before this; between two ticks
        assert world.statuses[-1][1].ready_replicas == 5
        world.calls.clear()
        await trio.sleep(10)
    # Ten ticks of five members: one runtime listing and one etcd member list per tick, and
    # one probe per member; the probes' answers replan without calling anything.
    assert world.calls["list_members"] == 10
    assert world.calls["member_list"] == 10
    assert world.calls["member_health"] == 50


@attrs.frozen
class Sweep(Action):
    """A test-only step: the whole of what adding an action takes."""

    note: str
    event_reason: ClassVar[str] = "Swept"

    async def execute(self, ctx: ActionContext) -> Outcome:
        SWEPT.append((self.note, len(ctx.observed.voters()), ctx.spec.size))
        return self.done()

    def describe(self) -> str:
        return f"swept {self.note}"

    def progress(self) -> str:
        return f"sweeping {self.note}"


def sweep_once(spec, observed):
    if observed.has_quorum() and len(observed.voters()) == spec.size and not SWEPT:
        return Sweep("dust")
    return None


SWEPT: list = []


async def test_a_new_action_is_one_class_and_a_planner(autojump_clock):
    world = MemoryWorld()
    SWEPT.clear()
    await run_fleet(world, size=3, seconds=10, planners=[sweep_once, *PLANNERS])
    assert SWEPT == [("dust", 3, 3)]
    assert ("Swept", "swept dust") in [(reason, message) for _, reason, message in world.events]
    progressing = [s for _, s in world.statuses if s.message == "sweeping dust"]
    assert progressing and {c.type: c for c in progressing[0].conditions}["Progressing"].reason == "Sweep"
    assert world.statuses[-1][1].message == "3 of 3 members healthy"


async def test_a_per_cluster_child_reads_what_the_cluster_actor_observed(autojump_clock):
    world = MemoryWorld()
    seen: list[tuple[float, int]] = []

    def watcher(context: ClusterContext) -> ChildSpec:
        async def run(task_status=trio.TASK_STATUS_IGNORED):
            task_status.started()
            while True:
                observed = await context.feed.wait_next()
                assert observed.cluster == context.ref
                seen.append((trio.current_time(), len(observed.healthy_voters())))

        return ChildSpec("watcher", run)

    await run_fleet(world, size=3, seconds=5, children=[watcher])
    # It saw the cluster grow to three healthy voters, one Observed per decision.
    counts = [n for _, n in seen]
    assert counts[0] == 0 and max(counts) == 3 and counts == sorted(counts)


async def test_removing_a_cluster_closes_its_ports_and_so_does_leaving_the_fleet(autojump_clock):
    world = MemoryWorld()
    async with open_supervisor(platform(world), timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=1, tls_enabled=False))])
        await trio.sleep(3)
        await fleet.apply([])
        assert world.closed == 1
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=1, tls_enabled=False))])
        await trio.sleep(3)
    assert world.closed == 2


def test_wait_is_not_an_action():
    assert not isinstance(Wait("x"), Action)


async def test_a_hung_member_is_restarted_after_unresponsive_after_and_replaced_if_still_hung(autojump_clock):
    world = MemoryWorld()
    spec = ClusterSpec(size=3, tls_enabled=False, health=HealthSpec(unresponsive_after="10s"))
    async with open_supervisor(platform(world), timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, spec)])
        await trio.sleep(5)
        assert world.statuses[-1][1].ready_replicas == 3
        hung_at = trio.current_time()
        world.hung.add("demo-1")
        await trio.sleep(60)
    # Restarted once 10 s passed since its last answer (probes come every tick, so that answer
    # came at most a tick before it hung), then, still silent 10 s after the restart, removed;
    # a new member took its place.
    (stopped_at, name), *_ = world.stops
    assert name == "demo-1" and 10 - TIMING.tick <= stopped_at - hung_at <= 10 + TIMING.tick
    reasons = [reason for _, reason, _ in world.events]
    assert reasons.count("MemberRestarted") == 1 and "MemberRemoved" in reasons
    final = world.statuses[-1][1]
    assert final.ready_replicas == 3 and "demo-1" not in {m.name for m in final.members}


async def test_a_per_cluster_child_that_keeps_crashing_never_takes_the_cluster_down(autojump_clock):
    world = MemoryWorld()
    crashes: list[float] = []
    observed: list[float] = []
    watcher_starts: list[float] = []

    def broken(context: ClusterContext) -> ChildSpec:
        async def run(task_status=trio.TASK_STATUS_IGNORED):
            task_status.started()
            await trio.sleep(0.01)
            crashes.append(trio.current_time())
            raise RuntimeError("a bug in a per-cluster service")

        return ChildSpec("broken", run)

    def watcher(context: ClusterContext) -> ChildSpec:
        async def run(task_status=trio.TASK_STATUS_IGNORED):
            watcher_starts.append(trio.current_time())
            task_status.started()
            while True:
                await context.feed.wait_next()
                observed.append(trio.current_time())

        return ChildSpec("watcher", run)

    await run_fleet(world, size=3, seconds=600, children=[broken, watcher])
    # Retried with a growing delay (at most a minute, plus jitter), never escalated: the cluster actor,
    # its members and the sibling service carried on the whole time.
    assert len(watcher_starts) == 1  # its supervisor never gave up (that restarts every service)
    assert world.statuses[-1][1].phase.value == "Running"
    assert all(s.phase.value != "Failed" for _, s in world.statuses)
    gaps = [b - a for a, b in itertools.pairwise(crashes)]
    assert 10 <= len(crashes) <= 30 and max(gaps) <= 60 * 1.1 + 1 and gaps[-1] >= 30, gaps
    assert max(world.started_at.values()) < 60  # no member started again after forming
    assert observed[-1] >= 590  # the sibling service still reading the feed at the end

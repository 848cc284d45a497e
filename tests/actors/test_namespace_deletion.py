"""A cluster whose namespace is being deleted, on trio's autojump clock (tests/actors/world.py).

The namespace controller deletes the pods well before the EtcdCluster; the runtime's refusal
to start them again (NamespaceTerminating) stops the cluster actor's steps, where another
refusal is retried after a hold-off with a warning Event each time."""

import attrs
import trio
import trio.testing

from actors.model import ClusterResource, ClusterSpec, ProcessState
from actors.platform import open_supervisor
from tests.actors.world import REF, TIMING, MemoryWorld, platform


async def test_a_cluster_in_a_namespace_being_deleted_stops_its_steps_and_says_why(autojump_clock):
    world = MemoryWorld()
    async with open_supervisor(platform(world), timing=TIMING) as fleet:
        await fleet.apply([ClusterResource(REF, ClusterSpec(size=1, tls_enabled=False))])
        await trio.sleep(5)
        assert world.statuses[-1][1].phase.value == "Running"
        # The namespace goes: its pod is deleted, and nothing new is taken in it.
        world.namespace_deleted = True
        world.runtime["demo-0"] = attrs.evolve(world.runtime["demo-0"], state=ProcessState.EXITED)
        events_before = len(world.events)
        await trio.sleep(60)
    # One refused start, then no more: a hold-off would have retried it about ten times here.
    assert world.calls["refused_start"] == 1
    # No warning Event per refusal (the API server takes none in that namespace); the status says why.
    refusals = [e for e in world.events[events_before:] if e[1] == "StartMemberFailed"]
    assert refusals == []
    final = world.statuses[-1][1]
    assert final.phase.value == "Failed" and "namespace is being deleted" in final.message

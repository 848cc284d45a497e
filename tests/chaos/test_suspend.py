"""etcd.io/suspend on real etcd, locally: while suspended a killed member stays down, the status
says Suspended and names what is held; removing the annotation heals it."""

from __future__ import annotations

import os
import signal

import attrs
import trio

from actors.model import ClusterRef, ClusterResource, ClusterSpec, Phase
from tests.chaos.lifecycle import is_healthy, open_local_supervisor

DEMO = ClusterResource(ClusterRef("default", "demo"), ClusterSpec(size=3, tls_enabled=False))


def condition(status, kind: str):  # type: ignore[no-untyped-def]
    return next((c for c in status.conditions if c.type == kind), None)


async def test_a_suspended_cluster_is_observed_but_not_healed_until_resumed(tmp_path) -> None:
    async with open_local_supervisor(tmp_path) as sup:
        await sup.fleet.apply([DEMO])
        status = await sup.wait_healthy(DEMO.ref, 3)
        await sup.fleet.apply([attrs.evolve(DEMO, suspended=True)])
        await sup.wait_for(DEMO.ref, lambda s: s.phase is Phase.SUSPENDED, timeout=10)
        victim = next(m for m in status.members if m.role.value == "follower")
        assert victim.pid is not None
        events_before = len(sup.recorder.events)
        os.kill(victim.pid, signal.SIGKILL)

        # Seen and reported: the member is down and what would be done is named, not done.
        held = await sup.wait_for(
            DEMO.ref,
            lambda s: (
                not next(m for m in s.members if m.name == victim.name).healthy
                and "held" in (condition(s, "Suspended").message if condition(s, "Suspended") else "")
            ),
            timeout=30,
        )
        assert held.phase is Phase.SUSPENDED
        assert condition(held, "Progressing").status == "False"
        await trio.sleep(5)  # several ticks: still nothing done
        still = sup.recorder.statuses[DEMO.ref]
        assert not next(m for m in still.members if m.name == victim.name).healthy
        steps = [reason for ref, reason, _ in sup.recorder.events[events_before:] if ref == DEMO.ref]
        assert not [r for r in steps if r not in ("PhaseSuspended",)], steps

        # Resumed: healed as usual.
        await sup.fleet.apply([DEMO])
        healed = await sup.wait_for(DEMO.ref, lambda s: is_healthy(s, 3), timeout=60)
        assert condition(healed, "Suspended") is None
        assert next(m for m in healed.members if m.name == victim.name).pid != victim.pid

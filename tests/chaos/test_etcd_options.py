"""spec.etcdOptions on real etcd, locally, under a checked workload: a change restarts the members
one at a time (followers first, the leader last) and each runs with the new flags after."""

from __future__ import annotations

from pathlib import Path

import attrs
import trio

from actors.model import ClusterRef, ClusterResource, ClusterSpec
from tests.chaos.lifecycle import follow_members, is_healthy, open_local_supervisor, rolled_since
from tests.harness.history import KvWorkload

DEMO = ClusterResource(ClusterRef("default", "demo"), ClusterSpec(size=3, tls_enabled=False))
TUNED = {"heartbeat-interval": "150", "election-timeout": "1500"}


def cmdline(pid: int) -> list[str]:
    """The process's arguments; none for a process gone since the status was written."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except FileNotFoundError:
        return []


async def test_an_etcd_options_change_rolls_the_members_one_at_a_time_under_load(tmp_path: Path) -> None:
    async with open_local_supervisor(tmp_path) as sup:
        await sup.fleet.apply([DEMO])
        status = await sup.wait_healthy(DEMO.ref, 3)
        workload = KvWorkload(endpoints=[m.client_url for m in status.members], max_operations=100_000)
        events_before = len(sup.recorder.events)
        tuned = attrs.evolve(DEMO, spec=attrs.evolve(DEMO.spec, etcd_options=TUNED))

        def running_tuned(s) -> bool:  # type: ignore[no-untyped-def]
            flags = [cmdline(m.pid) for m in s.members if m.pid]
            return (
                is_healthy(s, 3)
                and len(flags) == 3
                and all("--heartbeat-interval=150" in f and "--election-timeout=1500" in f for f in flags)
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            nursery.start_soon(follow_members, sup, DEMO.ref, workload)
            await workload.wait_for_more(50)
            await sup.fleet.apply([tuned])
            await sup.wait_for(DEMO.ref, running_tuned, timeout=120)
            await workload.wait_for_more(50)
            nursery.cancel_scope.cancel()

        steps = rolled_since(sup.recorder.events, events_before)
        rolled = [member for reason, member in steps if reason == "MemberRolled"]
        assert sorted(rolled) == ["demo-0", "demo-1", "demo-2"], steps  # each once, one at a time
    verdict = await workload.check(tmp_path / "history")
    assert verdict.ok, verdict.report

"""Chaos under continuous writes: kill etcd processes, crash actors, delete data, resize mid-recovery.

Afterwards every acknowledged write must be readable, the cluster back at its size and
healthy, Running, and no etcd process of the test left behind.
"""

import os
import shutil
import signal

import trio

from actors.model import Role
from tests.chaos.faults import AckedWriter, FaultPlan, with_faults
from tests.chaos.lifecycle import follow_members, is_healthy, open_local_supervisor, resource
from tests.harness.history import KvWorkload
from tests.harness.poll import eventually
from tests.harness.procs import etcd_pids_under


def member(status, name):
    return next(m for m in status.members if m.name == name)


async def test_nothing_acknowledged_is_lost_through_kills_crashes_data_loss_and_resizes(tmp_path):
    faults = FaultPlan()
    async with open_local_supervisor(tmp_path, wrap=with_faults(faults)) as sup:
        demo = resource(size=3)
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        writer = AckedWriter([m.client_url for m in status.members])
        # Besides many keys written once (nothing lost), a few keys read and written by several
        # clients at once: their history must be linearizable through every fault.
        workload = KvWorkload(endpoints=[m.client_url for m in status.members], max_operations=100_000)
        async with trio.open_nursery() as writers:
            writers.start_soon(writer.run)
            writers.start_soon(workload.run)
            writers.start_soon(follow_members, sup, demo.ref, writer, workload)

            # 1. SIGKILL each member in turn, the leader included; each comes back from its data.
            for name in ["demo-0", "demo-1", "demo-2"]:
                before = member(sup.recorder.statuses[demo.ref], name)
                os.kill(before.pid, signal.SIGKILL)
                await sup.wait_for(
                    demo.ref,
                    lambda s, n=name, p=before.pid: is_healthy(s, 3) and member(s, n).pid != p,
                    timeout=30,
                )
                await writer.wait_for_more()
                await workload.wait_for_more()

            # 2. Crash member actors and the cluster actor; their supervisors restart them.
            faults.member_probe_crashes = 4
            faults.cluster_observe_crashes = 2
            await eventually(
                lambda: not (faults.member_probe_crashes or faults.cluster_observe_crashes),
                within=30,
                what="every armed crash injected",
            )
            status = await sup.wait_healthy(demo.ref, 3, timeout=30)
            assert len(faults.injected) == 6
            await writer.wait_for_more()
            await workload.wait_for_more()

            # 3. Delete a follower's data directory: it is removed and replaced by a new member.
            victim = next(m for m in status.members if m.role is Role.FOLLOWER)
            shutil.rmtree(sup.runtime.member_dir(demo.ref, victim.name) / "data")
            status = await sup.wait_for(
                demo.ref,
                lambda s: is_healthy(s, 3) and victim.name not in {m.name for m in s.members},
                timeout=60,
            )
            assert victim.id not in {m.id for m in status.members}
            await writer.wait_for_more()
            await workload.wait_for_more()

            # 4. Kill a member and, while it recovers, ask for five.
            os.kill(next(m for m in status.members if m.role is Role.FOLLOWER).pid, signal.SIGKILL)
            await sup.fleet.apply([resource(size=5, generation=2)])
            status = await sup.wait_healthy(demo.ref, 5, timeout=90)
            await writer.wait_for_more()
            await workload.wait_for_more()

            # 5. SIGKILL a minority (two of five) at once.
            followers = [m for m in status.members if m.role is Role.FOLLOWER][:2]
            for m in followers:
                os.kill(m.pid, signal.SIGKILL)
            await sup.wait_for(
                demo.ref,
                lambda s: is_healthy(s, 5) and all(member(s, m.name).pid != m.pid for m in followers),
                timeout=60,
            )
            await writer.wait_for_more()
            await workload.wait_for_more()
            writers.cancel_scope.cancel()

        checked = await writer.verify()
        assert checked >= 7 * 20, f"only {checked} writes were acknowledged; the writer barely ran"
        verdict = await workload.check(tmp_path / "history")
        print(f"linearizability: {verdict.operations} operations checked in {verdict.seconds:.2f}s")
        assert verdict.ok, verdict.report
        assert workload.acknowledged >= 7 * 20
    assert etcd_pids_under(tmp_path) == []

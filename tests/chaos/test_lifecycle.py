"""Bootstrap, scale and heal real etcd clusters through the actors on the local runtime."""

import contextlib
import os
import re
import shutil
import signal

import attrs
import trio

from actors.model import HealthSpec
from tests.chaos.lifecycle import follow_members, is_healthy, open_local_supervisor, resource
from tests.harness.history import KvWorkload


async def test_bootstrap_one_member_at_a_time_then_scale_up_and_down(tmp_path):
    async with open_local_supervisor(tmp_path) as sup:
        demo = resource(size=3)
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        assert sorted(m.role.value for m in status.members) == ["follower", "follower", "leader"]
        reasons = sup.recorder.reasons(demo.ref)
        # Staged bootstrap: seed, then each further member as a learner, promoted before the next.
        assert reasons[:1] == ["SeedStarted"]
        adds = [r for r in reasons if r in ("LearnerAdded", "LearnerPromoted")]
        assert adds == ["LearnerAdded", "LearnerPromoted", "LearnerAdded", "LearnerPromoted"]

        # Scale up and down under a client workload whose history must stay linearizable; it
        # follows the members as they come and go.
        workload = KvWorkload(endpoints=[m.client_url for m in status.members], max_operations=100_000)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            nursery.start_soon(follow_members, sup, demo.ref, workload)
            await workload.wait_for_more(50)
            await sup.fleet.apply([resource(size=5, generation=2)])
            status = await sup.wait_healthy(demo.ref, 5)
            assert status.observed_generation == 2
            await workload.wait_for_more(50)

            await sup.fleet.apply([resource(size=3, generation=3)])
            status = await sup.wait_healthy(demo.ref, 3)
            await workload.wait_for_more(50)
            nursery.cancel_scope.cancel()
        # Scale-down removed the newest members, and none of them was the leader at the time.
        assert sorted(m.name for m in status.members) == ["demo-0", "demo-1", "demo-2"]
        verdict = await workload.check(tmp_path / "history")
        print(f"linearizability: {verdict.operations} operations checked")
        assert verdict.ok, verdict.report


async def test_a_killed_member_is_restarted_with_its_data(tmp_path):
    async with open_local_supervisor(tmp_path) as sup:
        demo = resource(size=3)
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        victim = next(m for m in status.members if m.role.value == "follower")
        os.kill(victim.pid, signal.SIGKILL)
        healed = await sup.wait_for(
            demo.ref,
            lambda s: (
                is_healthy(s, 3) and next(m for m in s.members if m.name == victim.name).pid != victim.pid
            ),
            timeout=30,
        )
        # Same member (name and id): restarted from its data, not replaced.
        again = next(m for m in healed.members if m.name == victim.name)
        assert again.id == victim.id


async def test_majority_lost_fails_then_recovers_through_recovering(tmp_path):
    async with open_local_supervisor(tmp_path) as sup:
        demo = resource(size=3)
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        frozen = [m for m in status.members if m.role.value == "follower"]
        # Freeze two of three: their processes live on but answer nothing, so quorum is gone
        # and no restart can help until they thaw.
        for m in frozen:
            os.kill(m.pid, signal.SIGSTOP)
        try:
            failed = await sup.wait_for(demo.ref, lambda s: s.phase.value == "Failed", timeout=30)
            # 1 of 3 while the unfrozen member still leads; 0 once it has stepped down for want of
            # a quorum (etcd's check-quorum, an election timeout later): a slow probe sees that.
            assert re.match(r"quorum lost: [01] of 3 voting members healthy", failed.message), failed
            available = {c.type: c for c in failed.conditions}["Available"]
            assert (available.status, available.reason) == ("False", "QuorumLost")
        finally:
            for m in frozen:
                os.kill(m.pid, signal.SIGCONT)
        await sup.wait_healthy(demo.ref, 3, timeout=30)

        # Now kill the same majority outright: they come back from their data.
        status = sup.recorder.statuses[demo.ref]
        for m in [m for m in status.members if m.role.value == "follower"]:
            os.kill(m.pid, signal.SIGKILL)
        await sup.wait_healthy(demo.ref, 3, timeout=30)
        phases = sup.recorder.phases(demo.ref)
        assert phases[:3] == ["Creating", "Running", "Failed"]
        assert "Recovering" in phases[3:] and phases[-1] == "Running"
        # Membership never changed: the same three members throughout.
        assert "MemberRemoved" not in sup.recorder.reasons(demo.ref)


async def test_a_member_with_corrupt_data_crash_loops_and_is_replaced_by_a_new_member(tmp_path):
    async with open_local_supervisor(tmp_path) as sup:
        demo = resource(size=3)
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        victim = next(m for m in status.members if m.role.value == "follower")
        os.kill(victim.pid, signal.SIGSTOP)  # hold it still while its database is overwritten
        db = sup.runtime.member_dir(demo.ref, victim.name) / "data" / "member" / "snap" / "db"
        db.write_bytes(b"\0garbage" * 4096)
        os.kill(victim.pid, signal.SIGKILL)
        replaced = await sup.wait_for(
            demo.ref,
            lambda s: is_healthy(s, 3) and victim.name not in {m.name for m in s.members},
            timeout=60,
        )
        assert victim.id not in {m.id for m in replaced.members}
        removed = [msg for ref, reason, msg in sup.recorder.events if reason == "MemberRemoved"]
        assert any(victim.name in msg and "data presumed corrupt" in msg for msg in removed), removed


async def test_a_refused_tls_switch_never_reaches_a_replacement_member(tmp_path):
    async with open_local_supervisor(tmp_path) as sup:
        demo = resource(size=3)  # TLS off
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        switched = attrs.evolve(demo, spec=attrs.evolve(demo.spec, tls_enabled=True), generation=2)
        await sup.fleet.apply([switched])
        await sup.wait_for(demo.ref, lambda s: "spec.security.tls.enabled" in s.message, timeout=10)
        # Lose a member's data: its replacement is allocated with the spec in force (plain
        # http), never the refused one, or it could not join its peers.
        victim = next(m for m in status.members if m.role.value == "follower")
        shutil.rmtree(sup.runtime.member_dir(demo.ref, victim.name) / "data")
        replaced = await sup.wait_for(
            demo.ref,
            lambda s: is_healthy(s, 3) and victim.name not in {m.name for m in s.members},
            timeout=60,
        )
        assert all(m.client_url.startswith("http://") for m in replaced.members), replaced.members
        assert all(m.peer_url.startswith("http://") for m in replaced.members), replaced.members
        assert "spec.security.tls.enabled" in replaced.message  # still refused, still said


async def test_a_frozen_follower_neither_blocks_a_scale_up_nor_stays_frozen(tmp_path):
    """SIGSTOP a follower, then ask for five: the scale-up completes around it, the frozen member
    is restarted from its data once it has been silent for unresponsiveAfter, and a concurrent
    client workload's history stays linearizable."""
    after = 3.0
    demo = resource(size=3)
    demo = attrs.evolve(
        demo, spec=attrs.evolve(demo.spec, health=HealthSpec(unresponsive_after=f"{after:.0f}s"))
    )
    async with open_local_supervisor(tmp_path) as sup:
        await sup.fleet.apply([demo])
        status = await sup.wait_healthy(demo.ref, 3)
        workload = KvWorkload(endpoints=[m.client_url for m in status.members], max_operations=100_000)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            await workload.wait_for_more(50)
            frozen = next(m for m in status.members if m.role.value == "follower")
            os.kill(frozen.pid, signal.SIGSTOP)
            frozen_at = trio.current_time()
            try:
                grown = attrs.evolve(demo, spec=attrs.evolve(demo.spec, size=5), generation=2)
                await sup.fleet.apply([grown])
                restarted = await sup.wait_for(
                    demo.ref,
                    lambda s: any(
                        m.name == frozen.name and m.healthy and m.pid != frozen.pid for m in s.members
                    ),
                    timeout=after + 20,
                )
                took = trio.current_time() - frozen_at
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(frozen.pid, signal.SIGCONT)
            again = next(m for m in restarted.members if m.name == frozen.name)
            assert again.id == frozen.id  # restarted from its data, not replaced
            await sup.wait_healthy(demo.ref, 5, timeout=60)
            await workload.wait_for_more(50)
            nursery.cancel_scope.cancel()
        print(f"frozen member restarted {took:.1f}s after SIGSTOP (unresponsiveAfter {after}s)")
        assert took <= after + 10
        assert "MemberRestarted" in sup.recorder.reasons(demo.ref)
        verdict = await workload.check(tmp_path / "history")
        print(f"linearizability: {verdict.operations} operations checked")
        assert verdict.ok, verdict.report


async def test_a_member_that_cannot_start_backs_off_and_the_status_says_why(tmp_path):
    """A lone member with a corrupt database cannot be replaced (no quorum to spare): it is
    restarted with a growing delay, and the status names its exit code and etcd's error."""
    async with open_local_supervisor(tmp_path) as sup:
        demo = resource(size=1)
        await sup.fleet.apply([demo])
        (only,) = (await sup.wait_healthy(demo.ref, 1)).members
        os.kill(only.pid, signal.SIGSTOP)  # hold it still while its database is overwritten
        db = sup.runtime.member_dir(demo.ref, only.name) / "data" / "member" / "snap" / "db"
        db.write_bytes(b"\0garbage" * 4096)
        starts_before = sup.runtime.statistics().starts
        os.kill(only.pid, signal.SIGKILL)
        await trio.sleep(12)
        starts = sup.runtime.statistics().starts - starts_before
        status = sup.recorder.statuses[demo.ref]
    # Restarts after 0, 0, 1, 2 and 4 s of waiting (each judged on a tick): a handful in 12 s,
    # where a restart on every exit would make dozens.
    print(f"{starts} starts in 12 s; status: {status.message}")
    assert 3 <= starts <= 7, starts
    assert "exited with code" in status.message and "etcd:" in status.message, status.message
    assert "restarting in" in status.message

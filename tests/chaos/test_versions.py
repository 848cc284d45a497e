"""spec.version on real etcd: the version asked for is the version run, changed by rolling
restarts one member at a time under a client workload (history checked with porcupine)."""

from __future__ import annotations

from pathlib import Path

import trio

from actors.model import ClusterRef, ClusterResource, ClusterSpec, ClusterStatus
from tests.chaos.lifecycle import follow_members, is_healthy, open_local_supervisor, rolled_since
from tests.harness.etcd_versions import built_or_skip, pinned
from tests.harness.history import KvWorkload

REF = ClusterRef("default", "demo")
BROKEN = "3.6.99"  # a version directory whose etcd cannot start


def etcd_dir_with(tmp_path: Path, versions: list[str]) -> Path:
    """An --etcd-dir holding the pinned builds of `versions`, and BROKEN, an etcd that exits."""
    root = tmp_path / "etcd-builds"
    root.mkdir()
    for version in versions:
        (root / version).symlink_to(built_or_skip(version).etcd.parent)
    (root / BROKEN).mkdir()
    broken = root / BROKEN / "etcd"
    broken.write_text("#!/bin/sh\necho 'etcd: this build is broken' >&2\nexit 1\n")
    broken.chmod(0o755)
    return root


def demo(version: str, generation: int) -> ClusterResource:
    return ClusterResource(REF, ClusterSpec(size=3, version=version, tls_enabled=False), generation)


def on(version: str):
    def check(status: ClusterStatus) -> bool:
        return is_healthy(status, 3) and all(m.version == version for m in status.members)

    return check


def settled_on(version: str):
    """Every member runs `version`, and etcd raised the cluster version to its minor (it does
    once it sees every member on it)."""
    minor = version.rsplit(".", 1)[0] + ".0"
    return lambda status: on(version)(status) and status.version == minor


def condition(status: ClusterStatus, kind: str):
    return next((c for c in status.conditions if c.type == kind), None)


async def assert_linearizable(workload: KvWorkload, tmp_path: Path) -> None:
    verdict = await workload.check(tmp_path / "history")
    print(f"linearizability: {verdict.operations} operations checked")
    assert verdict.ok, verdict.report
    assert workload.history.count(kind="put", outcome="ok") > 0


async def upgrade_under_workload(sup, workload: KvWorkload, version: str, generation: int) -> None:
    """Roll the cluster to `version` (a patch or the next minor) while `workload` runs: the old
    cluster version holds while members differ, each member rolls once, the leader last."""
    before = sup.recorder.statuses[REF]
    leader = next(m.name for m in before.members if m.role.value == "leader")
    start, published = len(sup.recorder.events), len(sup.recorder.history)
    await sup.fleet.apply([demo(version, generation)])
    await sup.wait_for(REF, settled_on(version), timeout=120)
    mixed = [
        s
        for ref, s in sup.recorder.history[published:]
        if ref == REF and len({m.version for m in s.members if m.version}) > 1
    ]
    assert mixed and {s.version for s in mixed} == {before.version}, {s.version for s in mixed}
    steps = rolled_since(sup.recorder.events, start)
    # Each member once; the leader last, after leadership moved to a restarted member.
    rolled = [name for reason, name in steps if reason == "MemberRolled"]
    assert sorted(rolled) == ["demo-0", "demo-1", "demo-2"] and rolled[-1] == leader, steps
    assert steps[-2][0] == "LeaderMoved" and steps[-2][1] in rolled[:-1], steps
    # Leadership moves once; a second time only if an election put it on a member
    # not yet restarted (each step is decided on answers asked after the last one).
    assert [reason for reason, _ in steps].count("LeaderMoved") <= 2, steps
    await workload.wait_for_more(50)


async def downgrade_under_workload(sup, workload: KvWorkload, version: str, generation: int) -> None:
    """One minor back through etcd's downgrade API while `workload` runs: enabled once, then the
    members go back one at a time, and the cluster version settles on the older minor."""
    start = len(sup.recorder.events)
    await sup.fleet.apply([demo(version, generation)])
    minor = version.rsplit(".", 1)[0] + ".0"
    await sup.wait_for(REF, lambda s: on(version)(s) and s.version == minor, timeout=120)
    reasons = [reason for _, reason, _ in sup.recorder.events[start:]]
    assert reasons.count("DowngradeEnabled") == 1, reasons
    assert reasons.index("DowngradeEnabled") < reasons.index("MemberRolled")
    assert reasons.count("MemberRolled") == 3, reasons
    assert reasons.count("LeaderMoved") <= 2, reasons
    await workload.wait_for_more(50)


async def test_upgrades_3_4_to_3_6_a_refused_skip_a_failed_rollout_and_the_downgrade_to_3_5(tmp_path):
    v34, v35, v36 = pinned("3.4"), pinned("3.5"), pinned("3.6")
    etcd_dir = etcd_dir_with(tmp_path, [v34, v35, v36])
    async with open_local_supervisor(tmp_path / "state", etcd_dir=etcd_dir) as sup:
        await sup.fleet.apply([demo(v34, 1)])
        status = await sup.wait_for(REF, on(v34), timeout=60)
        assert status.version == "3.4.0"

        # Skipping a minor is refused: the cluster keeps its spec and says why.
        await sup.fleet.apply([demo(v36, 2)])
        refused = await sup.wait_for(REF, lambda s: "cannot skip a minor" in s.message, timeout=10)
        assert condition(refused, "Degraded").reason == "InvalidSpec"
        assert all(m.version == v34 for m in refused.members)

        # A version not installed: Degraded says which and how to get it; nothing restarts.
        await sup.fleet.apply([demo("3.4.26", 3)])
        missing = await sup.wait_for(
            REF, lambda s: condition(s, "Degraded").reason == "VersionUnavailable", timeout=10
        )
        assert "etcd 3.4.26 is not installed" in condition(missing, "Degraded").message
        assert "make etcd-versions" in condition(missing, "Degraded").message
        assert is_healthy(missing, 3) and all(m.version == v34 for m in missing.members)

        workload = KvWorkload(endpoints=[m.client_url for m in status.members], max_operations=100_000)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            nursery.start_soon(follow_members, sup, REF, workload)
            await workload.wait_for_more(50)
            for generation, version in ((4, v35), (5, v36)):
                await upgrade_under_workload(sup, workload, version, generation)

            # A version whose etcd does not start: the first member tried stops the rollout,
            # the others keep running 3.6, and the cluster keeps serving.
            await sup.fleet.apply([demo(BROKEN, 6)])
            failed = await sup.wait_for(
                REF,
                lambda s: (c := condition(s, "Upgrading")) is not None and c.reason == "MemberFailedToStart",
                timeout=60,
            )
            assert condition(failed, "Upgrading").status == "False"
            assert "2 of 3 members left as they were" in condition(failed, "Upgrading").message
            await workload.wait_for_more(50)
            running = sup.recorder.statuses[REF]
            assert sorted(m.version for m in running.members if m.healthy) == [v36, v36]
            assert not any(r == "MemberRemoved" for r in sup.recorder.reasons(REF))

            # Going back to the version the others run brings the member back.
            await sup.fleet.apply([demo(v36, 7)])
            await sup.wait_for(REF, on(v36), timeout=120)
            await workload.wait_for_more(50)

            # 3.6 -> 3.5 through etcd's downgrade API: enabled once, then the members go back
            # one at a time, and the cluster version settles on 3.5.
            await downgrade_under_workload(sup, workload, v35, 8)
            nursery.cancel_scope.cancel()
        await assert_linearizable(workload, tmp_path)


async def test_3_6_to_3_7_and_back_to_3_6_under_a_checked_workload(tmp_path):
    v35, v36, v37 = pinned("3.5"), pinned("3.6"), pinned("3.7")
    etcd_dir = etcd_dir_with(tmp_path, [v36, v37])
    async with open_local_supervisor(tmp_path / "state", etcd_dir=etcd_dir) as sup:
        await sup.fleet.apply([demo(v36, 1)])
        status = await sup.wait_for(REF, settled_on(v36), timeout=60)
        workload = KvWorkload(endpoints=[m.client_url for m in status.members], max_operations=100_000)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            nursery.start_soon(follow_members, sup, REF, workload)
            await workload.wait_for_more(50)
            await upgrade_under_workload(sup, workload, v37, 2)

            # Two minors back is refused: 3.6 is the one downgrade 3.7 has.
            await sup.fleet.apply([demo(v35, 3)])
            refused = await sup.wait_for(REF, lambda s: "cannot go back" in s.message, timeout=10)
            assert condition(refused, "Degraded").reason == "InvalidSpec"
            assert all(m.version == v37 for m in refused.members)

            # 3.7 -> 3.6 through etcd's downgrade API, as 3.6 -> 3.5.
            await downgrade_under_workload(sup, workload, v36, 4)
            nursery.cancel_scope.cancel()
        await assert_linearizable(workload, tmp_path)

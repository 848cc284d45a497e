"""Members added to a TLS cluster with a history, on real etcd 3.6 processes, locally: each new
learner is sent a snapshot, and about half of them get their own publish entry inside it
(actors/publish_nudge.py). None of them is restarted for silence: the supervisor's empty
entries free the stuck ones within the first proposal's timeout. Without the nudge a stuck
learner answers nothing until unresponsiveAfter (30 s) restarts it; with four additions the
chance that none sticks is about 1 in 16."""

from __future__ import annotations

from pathlib import Path

import attrs

from actors.model import ClusterRef, ClusterResource, ClusterSpec
from tests.chaos.lifecycle import LocalSupervisor, is_healthy, open_local_supervisor
from tests.harness.history import write_past_snapshots

DEMO = ClusterResource(ClusterRef("default", "demo"), ClusterSpec(size=3, tls_enabled=True, version="3.6.16"))
# Past etcd 3.6's snapshot count (10000): the leader's log is compacted, a new member gets a snapshot.
WRITES = 12_000
STUCK = "failed to publish local member to cluster through raft"
GOT_SNAPSHOT = "received and saved database snapshot"


async def resize(sup: LocalSupervisor, size: int) -> None:
    await sup.fleet.apply([attrs.evolve(DEMO, spec=attrs.evolve(DEMO.spec, size=size))])
    await sup.wait_for(DEMO.ref, lambda s: is_healthy(s, size), timeout=120)


def member_logs(state: Path) -> dict[str, str]:
    members = state / "default" / "demo" / "members"
    return {d.name: (d / "etcd.log").read_text(errors="replace") for d in members.iterdir()}


async def test_learners_sent_a_snapshot_are_never_left_stuck_on_their_publish(tmp_path: Path) -> None:
    async with open_local_supervisor(tmp_path) as sup:
        await sup.fleet.apply([DEMO])
        status = await sup.wait_for(DEMO.ref, lambda s: is_healthy(s, 3), timeout=90)
        urls = [m.client_url for m in status.members]
        await write_past_snapshots(urls, sup.runtime.client_tls_files(DEMO.ref), WRITES)
        founders = {m.name for m in status.members}
        events_before = len(sup.recorder.events)
        added: dict[str, str] = {}  # "<name> (growth <n>)": its etcd log
        for growth, size in enumerate((5, 3, 5)):  # four learners added, two removed between
            await resize(sup, size)
            # Read before a shrink deletes the removed members' directories (names come back).
            if size == 5:
                logs = member_logs(tmp_path).items()
                added |= {f"{n} (growth {growth // 2 + 1})": text for n, text in logs if n not in founders}
        reasons = [reason for _, reason, _ in sup.recorder.events[events_before:]]
    assert len(added) == 4 and all(GOT_SNAPSHOT in text for text in added.values())
    stuck = sorted(name for name, text in added.items() if STUCK in text)
    print(f"learners whose publish was stuck behind their snapshot: {stuck or 'none'}")
    assert reasons.count("LearnerPromoted") == 4
    assert "MemberRestarted" not in reasons  # nobody waited out unresponsiveAfter

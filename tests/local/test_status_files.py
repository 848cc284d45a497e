"""status.json: the CR status shape, written atomically."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import trio

from actors.model import ClusterRef, ClusterStatus, Condition, MemberStatus, Phase, Role
from supervisor.local.status_files import StatusFiles

REF = ClusterRef("default", "demo")


def status(n: int) -> ClusterStatus:
    members = tuple(
        MemberStatus(
            name=f"demo-{i}",
            id=f"{0xABC0 + i:x}",
            peer_url=f"http://127.0.0.1:{23800 + i}",
            client_url=f"http://127.0.0.1:{23790 + i}",
            role=Role.LEADER if i == 0 else Role.FOLLOWER,
            healthy=True,
            pid=1000 + i,
        )
        for i in range(n)
    )
    return ClusterStatus(
        phase=Phase.RUNNING,
        ready_replicas=n,
        observed_generation=n,
        members=members,
        conditions=(Condition("Available", "True", "QuorumHealthy", "all members healthy"),),
        message=f"{n} members " + "x" * 2000,  # big enough that a torn write would show
    )


async def test_publish_writes_the_cr_status_shape(tmp_path: Path) -> None:
    files = StatusFiles(tmp_path)
    await files.publish(REF, status(3))
    path = tmp_path / "default" / "demo" / "status.json"
    assert files.path(REF) == path
    data = json.loads(path.read_text())
    assert data["phase"] == "Running" and data["readyReplicas"] == 3 and data["observedGeneration"] == 3
    assert [m["name"] for m in data["members"]] == ["demo-0", "demo-1", "demo-2"]
    assert data["members"][0] == {
        "name": "demo-0",
        "id": "abc0",
        "peerURL": "http://127.0.0.1:23800",
        "clientURL": "http://127.0.0.1:23790",
        "role": "leader",
        "healthy": True,
        "pid": 1000,
    }
    assert data["conditions"][0]["type"] == "Available"
    assert [p.name for p in path.parent.iterdir()] == ["status.json"], "no temp files left behind"

    files.remove(REF)
    assert not path.exists()
    files.remove(REF)  # idempotent


async def test_readers_never_see_a_partial_file(tmp_path: Path) -> None:
    files = StatusFiles(tmp_path)
    await files.publish(REF, status(1))
    path = files.path(REF)
    # A reader holding the old file keeps the old content: the new one arrived by rename.
    with path.open() as old:
        await files.publish(REF, status(2))
        assert json.loads(old.read())["readyReplicas"] == 1
    assert json.loads(path.read_text())["readyReplicas"] == 2

    bad: list[str] = []
    done = threading.Event()

    def read_constantly() -> None:
        while not done.is_set():
            try:
                json.loads(path.read_text())
            except ValueError as exc:
                bad.append(str(exc))

    reader = threading.Thread(target=read_constantly)
    reader.start()
    try:
        for i in range(100):
            await files.publish(REF, status(1 + i % 5))
    finally:
        done.set()
        reader.join()
    assert bad == []
    assert sorted(os.listdir(path.parent)) == ["status.json"]
    await trio.lowlevel.checkpoint()

"""The terminal table (pure) and the board that draws it."""

from __future__ import annotations

import io

import trio

from actors.model import ClusterRef, ClusterStatus, Condition, MemberStatus, Phase, Role
from supervisor.local.table import CLEAR_AND_HOME, StatusBoard, render_status_table
from tests.harness.poll import eventually

DEMO = ClusterRef("default", "demo")
OTHER = ClusterRef("apps", "cache")


def running() -> ClusterStatus:
    return ClusterStatus(
        phase=Phase.RUNNING,
        ready_replicas=2,
        members=(
            MemberStatus(
                "demo-0",
                "8e9e05c52164694d",
                "http://127.0.0.1:23800",
                "http://127.0.0.1:23790",
                Role.LEADER,
                True,
                4242,
            ),
            MemberStatus(
                "demo-1",
                "91bc3c398fb3c146",
                "http://127.0.0.1:23801",
                "http://127.0.0.1:23791",
                Role.FOLLOWER,
                True,
                4243,
            ),
            MemberStatus(
                "demo-2", "", "http://127.0.0.1:23802", "http://127.0.0.1:23792", Role.UNKNOWN, False
            ),
        ),
        conditions=(Condition("Degraded", "True", "MemberDown", "demo-2 is not running"),),
        message="1 of 3 members down",
    )


def test_a_block_per_cluster_and_a_row_per_member() -> None:
    text = render_status_table({DEMO: running(), OTHER: ClusterStatus()}, width=200)
    lines = text.splitlines()
    # Sorted by namespace/name: apps/cache first.
    assert lines[0].startswith("apps/cache  Creating  ready 0/0")
    demo = lines.index(next(line for line in lines if line.startswith("default/demo")))
    assert lines[demo] == "default/demo  Running  ready 2/3  1 of 3 members down"
    header = lines[demo + 1].split()
    assert header[:4] == ["MEMBER", "ROLE", "HEALTHY", "PID"]
    row0, row1, row2 = (lines[demo + 2 + i].split() for i in range(3))
    assert row0 == ["demo-0", "leader", "yes", "4242", "http://127.0.0.1:23790", "8e9e05c52164694d"]
    assert row1[:4] == ["demo-1", "follower", "yes", "4243"]
    assert row2 == ["demo-2", "unknown", "no", "-", "http://127.0.0.1:23792", "-"]
    assert any("Degraded: MemberDown demo-2 is not running" in line for line in lines)
    # Columns line up: every member row starts its CLIENT URL at the same offset.
    offsets = {lines[demo + 2 + i].index("http://") for i in range(3)}
    assert len(offsets) == 1


def test_narrow_terminals_get_clipped_lines() -> None:
    text = render_status_table({DEMO: running()}, width=30)
    assert all(len(line) <= 30 for line in text.splitlines())
    assert "…" in text
    assert render_status_table({}, width=80) == "no clusters\n"


async def test_board_redraws_in_place_on_a_tty_and_rate_limits() -> None:
    out = io.StringIO()
    board = StatusBoard(out, tty=True, min_interval=0.2)
    board.update({DEMO: running()})
    assert out.getvalue().startswith(CLEAR_AND_HOME) and "demo-0" in out.getvalue()
    draws = out.getvalue().count(CLEAR_AND_HOME)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(board.run)
        board.update({DEMO: ClusterStatus(phase=Phase.SCALING)})  # within the interval: pending
        assert out.getvalue().count(CLEAR_AND_HOME) == draws
        await eventually(
            lambda: out.getvalue().count(CLEAR_AND_HOME) != draws, within=2, every=0.02, what="a new drawing"
        )
        assert "Scaling" in out.getvalue().rsplit(CLEAR_AND_HOME, 1)[1]
        nursery.cancel_scope.cancel()


def test_board_prints_snapshots_only_on_change_when_not_a_tty() -> None:
    out = io.StringIO()
    board = StatusBoard(out, tty=False, min_interval=0)
    board.update({DEMO: running()})
    board.update({DEMO: running()})
    board.update({DEMO: ClusterStatus(phase=Phase.FAILED)})
    text = out.getvalue()
    assert CLEAR_AND_HOME not in text
    assert text.count("--- ") == 2 and "Failed" in text


def test_file_problems_come_first_and_each_cluster_shows_its_etcdctl_command() -> None:
    def command(ref: ClusterRef) -> str:
        return f'eval "$(etcd-supervisor local env {ref} --state-dir /a/very/long/path/to/the/state)"'

    not_created = ClusterStatus(message="not created: spec.size: must be between 1 and 9 (got 0)")
    text = render_status_table(
        {DEMO: running(), OTHER: not_created},
        width=60,
        problems=[
            "cannot use c.yaml: not valid YAML: line 3, column 11: mapping values are not allowed here"
        ],
        env_command=command,
    )
    lines = text.splitlines()
    assert lines[0].startswith("! cannot use c.yaml: not valid YAML: line 3") and len(lines[0]) == 60
    # Never cut: a wrapped command can still be copied, a cut one cannot.
    assert f"  etcdctl: {command(DEMO)}" in lines
    assert not any("local env apps/cache" in line for line in lines), "nothing to connect to yet"


async def test_the_board_shows_file_problems_until_replaced() -> None:
    out = io.StringIO()
    board = StatusBoard(out, tty=False, min_interval=0)
    board.update({DEMO: running()})
    board.show_problems(["cannot use c.yaml: no EtcdCluster document in it"])
    assert (
        out.getvalue().rsplit("--- ", 1)[1].splitlines()[1]
        == "! cannot use c.yaml: no EtcdCluster document in it"
    )
    board.show_problems([])
    assert "! cannot use" not in out.getvalue().rsplit("--- ", 1)[1]


def test_only_conditions_that_need_attention_are_flagged() -> None:
    conditions = (
        Condition("Available", "True", "QuorumHealthy", ""),
        Condition("SpaceAvailable", "True", "WithinQuota", "quota 2048.0 MiB"),
        Condition("BackupHealthy", "False", "BackupsFailing", "3 backups failed in a row"),
        Condition("Upgrading", "True", "RollingOut", "demo-1 next"),
        Condition("Degraded", "False", "AllMembersHealthy", ""),
    )
    status = ClusterStatus(phase=Phase.RUNNING, conditions=conditions)
    lines = render_status_table({DEMO: status}, width=200).splitlines()
    flagged = [line.strip() for line in lines if "!" in line]
    assert flagged == [
        "! BackupHealthy: BackupsFailing 3 backups failed in a row",
        "! Upgrading: RollingOut demo-1 next",
    ]

"""A daemon's death is no etcd outage: `kill -9` of `etcd-supervisor local` leaves its members
serving, the next daemon adopts them (same pids), and `--leave-members-running` does the same on
purpose, for an upgrade."""

import json
import os
import signal
import subprocess
from pathlib import Path

import trio

from supervisor.aio import open_asyncio_loop
from supervisor.local.processes import pid_is_alive
from tests.cli.test_local_command import CLI, DOC, etcdctl, healthy, status_of, wait_status
from tests.harness.history import OK, KvWorkload
from tests.harness.poll import eventually
from tests.harness.procs import etcd_pids_under


def start(file: Path, state: Path, log: Path, *flags: str) -> subprocess.Popen:
    # Logs to a file, not a pipe: nobody reads a pipe while the test runs, and a full one blocks.
    with log.open("a") as out:
        return subprocess.Popen(
            [
                str(CLI),
                "--log-format",
                "json",
                "local",
                str(file),
                "--state-dir",
                str(state),
                "--no-board",
                *flags,
            ],
            stdout=out,
            stderr=out,
        )


def stop(daemon: subprocess.Popen) -> int:
    daemon.send_signal(signal.SIGTERM)
    return daemon.wait(timeout=60)


async def wait_status_async(state: Path, name: str, predicate, timeout: float = 60.0) -> dict:
    """wait_status without blocking trio: the workload runs beside it."""
    return await eventually(
        lambda: status_of(state, name),
        lambda status: status is not None and predicate(status),
        within=timeout,
        every=0.3,
        what=f"the status of {name}",
    )


def leave_running_once(file: Path, state: Path, log: Path, name: str) -> dict:
    """Run a daemon with --leave-members-running until the cluster is healthy, then SIGTERM it."""
    daemon = start(file, state, log, "--leave-members-running")
    try:
        return wait_status(state, name, healthy(1))
    finally:
        assert stop(daemon) == 0, log.read_text()[-2000:]


def pids(status: dict) -> dict[str, int]:
    return {m["name"]: m["pid"] for m in status["members"]}


def adopted(log: Path) -> list[str]:
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return sorted(line["message"].split()[1] for line in lines if line["message"].startswith("adopted "))


async def test_kill_9_of_the_daemon_is_no_outage_and_the_next_daemon_adopts_the_members(tmp_path):
    file, state, log = tmp_path / "clusters.yaml", tmp_path / "state", tmp_path / "daemon.log"
    file.write_text(DOC.format(name="alpha", size=3, tls="false"))
    daemon = start(file, state, log)
    try:
        before = await wait_status_async(state, "alpha", healthy(3))
        workload = KvWorkload(endpoints=[m["clientURL"] for m in before["members"]])
        async with open_asyncio_loop(), trio.open_nursery() as nursery:
            nursery.start_soon(workload.run)
            await workload.wait_for_more(100)
            daemon.kill()  # SIGKILL to the daemon's pid alone, as a crash or the OOM killer would
            daemon.wait()
            killed_at = len(workload.history.operations)
            await workload.wait_for_more(100)  # served with no daemon at all
            assert all(pid_is_alive(pid) for pid in pids(before).values()), "members died with the daemon"

            (state / "default" / "alpha" / "status.json").unlink()  # so the next status is the new daemon's
            events = state / "default" / "alpha" / "events.jsonl"
            seen = len(events.read_text().splitlines())
            daemon = start(file, state, log)
            after = await wait_status_async(state, "alpha", healthy(3))
            assert pids(after) == pids(before), "adopted, not restarted"
            # The members never failed: nor does the phase (an alert on Failed would fire on
            # every restart of the daemon).
            new = [json.loads(line) for line in events.read_text().splitlines()[seen:]]
            assert [e for e in new if "Failed" in e["reason"] + e["message"]] == [], new
            assert adopted(log) == ["default/alpha/alpha-0", "default/alpha/alpha-1", "default/alpha/alpha-2"]
            await workload.wait_for_more(100)
            nursery.cancel_scope.cancel()
        since_kill = workload.history.operations[killed_at:]
        failed = [op for op in since_kill if op.outcome != OK]
        # The last operations may have been cut short by the cancellation above.
        assert len(failed) <= workload.clients, f"{len(failed)} of {len(since_kill)} failed after the kill"
        verdict = await workload.check(tmp_path / "history")
        print(f"linearizability: {verdict.operations} operations checked in {verdict.seconds:.2f}s")
        assert verdict.ok, verdict.report
    finally:
        assert stop(daemon) == 0, log.read_text()[-2000:]
    assert etcd_pids_under(state) == [], "a graceful stop stops adopted members too"


def test_members_left_running_by_a_stopped_daemon_are_adopted_by_the_next(tmp_path):
    file, state, log = tmp_path / "clusters.yaml", tmp_path / "state", tmp_path / "daemon.log"
    file.write_text(DOC.format(name="beta", size=1, tls="true"))
    before = leave_running_once(file, state, log, "beta")
    (pid,) = pids(before).values()
    assert pid_is_alive(pid), "--leave-members-running: the member outlives a SIGTERM of the daemon"
    tls = state / "default" / "beta" / "tls"
    certs = [f"--cacert={tls / 'ca.crt'}", f"--cert={tls / 'client.crt'}", f"--key={tls / 'client.key'}"]
    etcdctl(before, *certs, "put", "upgrade", "survived")

    (state / "default" / "beta" / "status.json").unlink()
    daemon = start(file, state, log)
    try:
        after = wait_status(state, "beta", healthy(1))
        assert pids(after) == pids(before)
        assert etcdctl(after, *certs, "get", "upgrade", "--print-value-only").strip() == "survived"
    finally:
        assert stop(daemon) == 0, log.read_text()[-2000:]
    assert etcd_pids_under(state) == [] and not pid_is_alive(pid)
    assert os.path.exists(state / "default" / "beta" / "members" / "beta-0" / "data" / "member" / "wal")


def test_a_recorded_pid_that_another_process_has_now_is_not_adopted_and_the_member_starts_afresh(tmp_path):
    file, state, log = tmp_path / "clusters.yaml", tmp_path / "state", tmp_path / "daemon.log"
    file.write_text(DOC.format(name="gamma", size=1, tls="false"))
    before = leave_running_once(file, state, log, "gamma")
    (old,) = pids(before).values()
    os.kill(old, signal.SIGKILL)  # the member dies while no daemon runs; its pid goes to another
    sleeper = subprocess.Popen(["sleep", "300"])
    record = state / "default" / "gamma" / "members" / "gamma-0" / "process.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "pid": sleeper.pid}))
    try:
        (state / "default" / "gamma" / "status.json").unlink()
        daemon = start(file, state, log)
        try:
            after = wait_status(state, "gamma", healthy(1))
            assert pids(after)["gamma-0"] not in (old, sleeper.pid), "started afresh"
            assert sleeper.poll() is None, "a process that is not our etcd is never signalled"
            assert adopted(log) == []
        finally:
            assert stop(daemon) == 0, log.read_text()[-2000:]
        assert sleeper.poll() is None and etcd_pids_under(state) == []
    finally:
        sleeper.kill()
        sleeper.wait()

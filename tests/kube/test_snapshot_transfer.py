"""The snapshot push into a pod (supervisor/kube/snapshot_transfer.py), over real loopback TCP,
with the receiver run as the pods run it: `etcd-supervisor receive-snapshot`."""

from __future__ import annotations

import hashlib
import os
import sys
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from supervisor.kube.snapshot_transfer import TransferFailed, push_snapshot
from tests.harness.objstore import free_port

pytestmark = pytest.mark.trio


async def _chunks(data: bytes, size: int) -> object:
    for start in range(0, len(data), size):
        yield data[start : start + size]
        await trio.lowlevel.checkpoint()


async def test_the_receiver_keeps_only_a_whole_transfer_with_its_token(tmp_path: Path) -> None:
    port, out = free_port(), tmp_path / "snapshot.db"
    data = os.urandom(3 << 20)
    cli = Path(sys.executable).parent / "etcd-supervisor"
    argv = [str(cli), "--log-format=text", "receive-snapshot", f"--out={out}", f"--port={port}"]
    async with trio.open_nursery() as nursery:
        receiver = partial(
            trio.run_process, argv, env={**os.environ, "SNAPSHOT_TOKEN": "right"}, capture_stdout=True
        )
        proc = await nursery.start(receiver)
        # A wrong token is turned away; so is a transfer that breaks off before its end.
        with pytest.raises(TransferFailed):
            await push_snapshot("127.0.0.1", "wrong", _chunks(b"junk", 2), port=port)

        async def broken() -> object:
            yield data[:1000]
            raise RuntimeError("the store went away")

        with pytest.raises(RuntimeError):
            await push_snapshot("127.0.0.1", "right", broken(), port=port)
        assert proc.returncode is None  # still waiting for a whole one
        sent = await push_snapshot("127.0.0.1", "right", _chunks(data, 100_000), port=port)
    assert proc.returncode == 0
    assert sent.size == len(data) and sent.sha256 == hashlib.sha256(data).hexdigest()
    assert out.read_bytes() == data

"""The snapshot push into a pod (supervisor/kube/snapshot_transfer.py), over real loopback TCP,
with the receiver run as the pods run it: `etcd-supervisor receive-snapshot`."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import sys
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from actors.model import ClusterRef
from supervisor.kube import manifests as m
from supervisor.kube.snapshot_transfer import TransferFailed, client_tls, push_snapshot
from supervisor.kube.snapshots import POD_SERVER_NAME
from supervisor.kube.tls import generate_cluster_tls
from tests.harness.objstore import free_port

pytestmark = pytest.mark.trio


async def _chunks(data: bytes, size: int) -> object:
    for start in range(0, len(data), size):
        yield data[start : start + size]
        await trio.lowlevel.checkpoint()


def _receiver_argv(out: Path, port: int, *extra: str) -> list[str]:
    cli = Path(sys.executable).parent / "etcd-supervisor"
    return [str(cli), "--log-format=text", "receive-snapshot", f"--out={out}", f"--port={port}", *extra]


async def test_the_receiver_keeps_only_a_whole_transfer_with_its_token(tmp_path: Path) -> None:
    port, out = free_port(), tmp_path / "snapshot.db"
    data = os.urandom(3 << 20)
    argv = _receiver_argv(out, port)
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


def _cluster_files(tmp_path: Path, name: str) -> dict[str, Path]:
    """A cluster's certificates as the operator makes them, one file per Secret key."""
    material = generate_cluster_tls(ClusterRef("default", name), now=dt.datetime.now(dt.UTC))
    folder = tmp_path / name
    folder.mkdir()
    for key, pem in material.files.items():
        (folder / key).write_bytes(pem)
    return {key: folder / key for key in material.files}


async def test_with_tls_only_a_pod_with_the_clusters_certificate_gets_the_snapshot(tmp_path: Path) -> None:
    ours, other = _cluster_files(tmp_path, "main"), _cluster_files(tmp_path, "other")
    port, out = free_port(), tmp_path / "snapshot.db"
    data = os.urandom(1 << 20)
    argv = _receiver_argv(out, port, f"--tls-cert={ours[m.TLS_CERT]}", f"--tls-key={ours[m.TLS_KEY]}")
    async with trio.open_nursery() as nursery:
        receiver = partial(
            trio.run_process, argv, env={**os.environ, "SNAPSHOT_TOKEN": "right"}, capture_stdout=True
        )
        proc = await nursery.start(receiver)
        # A receiver whose certificate is not of the cluster's CA gets nothing, not even the token ...
        with pytest.raises(TransferFailed, match="TLS"):
            await push_snapshot(
                "127.0.0.1", "right", _chunks(data, 65536), port=port,
                tls=client_tls(other[m.TLS_CA_CERT]), server_name=POD_SERVER_NAME,
            )  # fmt: skip
        # ... nor does a plain connection reach it (it waits for a TLS handshake) ...
        with pytest.raises(TransferFailed):
            await push_snapshot("127.0.0.1", "right", _chunks(b"junk", 2), port=port)
        assert proc.returncode is None and not out.exists()
        # ... while the cluster's CA and the name every member certificate carries get it through.
        sent = await push_snapshot(
            "127.0.0.1", "right", _chunks(data, 65536), port=port,
            tls=client_tls(ours[m.TLS_CA_CERT]), server_name=POD_SERVER_NAME,
        )  # fmt: skip
    assert proc.returncode == 0
    assert sent.size == len(data) and out.read_bytes() == data

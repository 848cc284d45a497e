"""Snapshots through the client: etcd's tools accept them and their checksums verify."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from hyperframe.frame import DataFrame, Frame

from supervisor.etcd import EtcdConnectionError, frame_repr, open_etcd_client
from tests.harness.etcd import EtcdBinaries, EtcdCluster, running_cluster


@pytest.fixture(scope="module")
def cluster(binaries: EtcdBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(binaries, tmp_path_factory.mktemp("snap"), size=1) as cluster:
        yield cluster


async def test_snapshot_is_valid_and_verified(
    cluster: EtcdCluster, asyncio_loop: None, tmp_path: Path
) -> None:
    path = trio.Path(tmp_path / "db.snapshot")
    async with open_etcd_client(cluster.endpoints) as client:
        for i in range(200):
            await client.put(f"/snap/{i:04d}".encode(), b"x" * 4096)
        async with await path.open("wb") as f:
            result = await client.snapshot(f.write)
    data = await path.read_bytes()
    assert result.verified
    assert result.size == len(data)
    assert result.sha256 == hashlib.sha256(data).hexdigest()
    # etcd's trailing checksum, checked independently of the client.
    assert hashlib.sha256(data[:-32]).digest() == data[-32:]
    status = cluster.snapshot_status(tmp_path / "db.snapshot")
    assert int(status["totalKey"]) >= 200  # type: ignore[call-overload]
    assert int(status["revision"]) >= 201  # type: ignore[call-overload]


async def test_snapshot_from_a_named_endpoint(cluster: EtcdCluster, asyncio_loop: None) -> None:
    chunks: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        chunks.append(chunk)

    async with open_etcd_client(["http://127.0.0.1:9", *cluster.endpoints]) as client:
        result = await client.snapshot(sink, endpoint=cluster.endpoints[0])
        # Without an endpoint the dead one is skipped.
        again = await client.snapshot(sink)
    assert result.verified and again.verified
    assert result.endpoint == cluster.endpoints[0]


@pytest.mark.parametrize("size", [0, 1, 9, 10, 11, 12, 16384])
@pytest.mark.parametrize("pad", [None, 0, 1, 10, 11, 200])
def test_cheap_data_frame_repr_matches_hyperframe(size: int, pad: int | None) -> None:
    # h2 builds repr(frame) for every frame it receives; ours must read exactly as hyperframe's.
    frame = DataFrame(1, data=bytes(i % 251 for i in range(size)))
    if pad is not None:
        frame.flags.add("PADDED")
        frame.pad_length = pad
    expected = Frame._body_repr(frame)
    frame_repr.install()
    assert DataFrame.__dict__["_body_repr"] is frame_repr.data_frame_body_repr
    assert frame._body_repr() == expected
    assert repr(frame).endswith(expected)


async def test_a_member_killed_mid_snapshot_is_a_connection_error(
    binaries: EtcdBinaries, tmp_path: Path, asyncio_loop: None
) -> None:
    with running_cluster(binaries, tmp_path, size=1) as doomed:
        received: list[int] = []

        async def kill_after_the_first_piece(chunk: bytes) -> None:
            received.append(len(chunk))
            if len(received) == 1:
                doomed.members[0].kill()

        async with open_etcd_client(doomed.endpoints, call_timeout=30) as client:
            value = bytes(range(256)) * 4096  # 1 MiB
            for i in range(24):
                await client.put(f"/big/{i}".encode(), value)
            with trio.fail_after(20), pytest.raises(EtcdConnectionError):
                await client.snapshot(kill_after_the_first_piece)
        assert received and sum(received) < 24 * len(value)  # it ended early, and said so

"""The local restorer's fetched path (supervisor/local/restore.py): an encoded (or remote)
backup is read, decoded and hashed into the member's directory, checked against its metadata,
then handed to etcdutl. Here etcdutl is a stand-in script that records what it was given, so
these run without etcd: the snapshot reaches it byte for byte, and its own sha256 pass is
skipped only when ours was compared with the sha256 the backup recorded."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from actors.backup.encoded_store import encoded
from actors.backup.source import metadata_key
from actors.errors import RestoreFailed, StoreUnavailable
from actors.model import (
    DEFAULT_VERSION,
    BackupSpec,
    ClusterRef,
    ClusterSpec,
    Compression,
    EncryptionSpec,
    LocalStore,
    MemberLaunch,
    RestoreSpec,
    StoreSpec,
)
from actors.store_port import ObjectStore
from supervisor.local import open_local_runtime
from supervisor.local.backups import LocalKeyFiles
from supervisor.local.restore import LocalRestorer
from supervisor.stores import open_store

KEY = "default/demo/20261128T000000Z-rev42.db"
SEALED = BackupSpec(compression=Compression.ZSTD, encryption=EncryptionSpec("backup-key"))
# What the stand-in records: its arguments, one a line, and a copy of the snapshot it was given.
STAND_IN = """#!/bin/sh
printf '%s\\n' "$@" > "$(dirname "$0")/argv"
cp "$3" "$(dirname "$0")/snapshot"
"""


def snapshot_bytes(size: int) -> bytes:
    """Starts as an etcd snapshot does (eight zero bytes), incompressible, several segments."""
    return bytes(8) + os.urandom(size - 8)


@pytest.fixture
def etcd_dir(tmp_path: Path) -> Path:
    tool = tmp_path / "etcd" / DEFAULT_VERSION / "etcdutl"
    tool.parent.mkdir(parents=True)
    tool.write_text(STAND_IN)
    tool.chmod(0o755)
    return tool.parent


async def restore(tmp_path: Path, store: ObjectStore) -> tuple[int, str]:
    """LocalRestorer.restore_seed of KEY from `store` (wrapped as the new cluster's spec.backup
    says), as the RestoreFromBackup step runs it: the size and sha256 it reports."""
    cluster = ClusterRef("default", "restored")
    spec = ClusterSpec(size=1, tls_enabled=False, backup=SEALED)
    source = RestoreSpec(store=StoreSpec(local=LocalStore(str(tmp_path / "unused"))), key=KEY)
    async with open_local_runtime(tmp_path / "state", etcd_dir=tmp_path / "etcd") as runtime:
        restorer = LocalRestorer(runtime, lambda _: store, keys=LocalKeyFiles(tmp_path))
        urls = await runtime.allocate_member(cluster, "m0", spec)
        launch = MemberLaunch(cluster, "m0", urls, (("m0", urls.peer_url),), "new", spec)
        try:
            restored = await restorer.restore_seed(launch, source)
        except RestoreFailed as exc:
            failed = exc  # raised below, not through the runtime's nursery (as a group)
        else:
            failed = None
        # Never left behind, restored or not.
        assert not (runtime.member_dir(cluster, "m0") / "restore.db").exists()
    if failed is not None:
        raise failed
    return restored.size, restored.sha256


async def stored_backup(tmp_path: Path, snapshot: bytes, meta: dict[str, object] | None) -> ObjectStore:
    """A local directory holding KEY encrypted and compressed, and `meta` as its metadata."""
    (tmp_path / "backup-key").write_text(f"key={base64.b64encode(os.urandom(32)).decode()}\n")
    raw = open_store(StoreSpec(local=LocalStore(str(tmp_path / "backups"))), credentials=None)
    writer = encoded(raw, ClusterRef("default", "demo"), SEALED, LocalKeyFiles(tmp_path))

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(snapshot), 300_000):
            yield snapshot[start : start + 300_000]

    await writer.put_stream(KEY, chunks())
    if meta is not None:
        await raw.put_bytes(metadata_key(KEY), json.dumps(meta).encode())
    return raw


async def test_a_snapshot_that_matches_its_recorded_sha256_is_restored_without_etcdutls_second_pass(
    tmp_path, etcd_dir
):
    snapshot = snapshot_bytes(3 * (1 << 20) + 12_345)
    sha256 = hashlib.sha256(snapshot).hexdigest()
    store = await stored_backup(tmp_path, snapshot, {"snapshotSha256": sha256, "sha256": "of-the-object"})

    assert await restore(tmp_path, store) == (len(snapshot), sha256)
    assert (etcd_dir / "snapshot").read_bytes() == snapshot
    argv = (etcd_dir / "argv").read_text().splitlines()
    assert argv[:2] == ["snapshot", "restore"] and "--skip-hash-check" in argv, argv


@pytest.mark.parametrize(
    "meta",
    [None, {"snapshotSha256": "", "sha256": ""}, {"revision": 42}],
    ids=["no metadata (not one of ours)", "empty", "none recorded"],
)
async def test_without_a_recorded_sha256_etcdutl_checks_the_snapshot_itself(tmp_path, etcd_dir, meta):
    snapshot = snapshot_bytes(1 << 20)
    store = await stored_backup(tmp_path, snapshot, meta)

    assert await restore(tmp_path, store) == (len(snapshot), hashlib.sha256(snapshot).hexdigest())
    assert (etcd_dir / "snapshot").read_bytes() == snapshot
    assert "--skip-hash-check" not in (etcd_dir / "argv").read_text().splitlines()


async def test_a_snapshot_that_differs_from_its_recorded_sha256_never_reaches_etcdutl(tmp_path, etcd_dir):
    store = await stored_backup(tmp_path, snapshot_bytes(1 << 20), {"snapshotSha256": "0" * 64})

    with pytest.raises(RestoreFailed, match="is corrupt: sha256"):
        await restore(tmp_path, store)
    assert not (etcd_dir / "argv").exists()


class BreaksMidway:
    """A store whose read fails after a few pieces (a remote store going away)."""

    def __init__(self, pieces: int) -> None:
        self.pieces = pieces

    async def get_stream(self, key: str) -> AsyncIterator[bytes]:
        for _ in range(self.pieces):
            yield bytes(1 << 20)
        raise StoreUnavailable(f"s3: get {key!r}: the endpoint did not answer")

    async def aclose(self) -> None:
        pass


async def test_a_read_that_fails_midway_fails_the_restore_by_the_stores_error_and_leaves_no_file(
    tmp_path, etcd_dir
):
    with pytest.raises(RestoreFailed, match=r"could not be read: s3: get .* did not answer"):
        await restore(tmp_path, BreaksMidway(5))  # type: ignore[arg-type]
    assert not (etcd_dir / "argv").exists()

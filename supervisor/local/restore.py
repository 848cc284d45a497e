"""Restoring a new local cluster's seed from a backup (spec.restore).

The snapshot is fetched from the store into the member's directory (its sha256 checked against
the backup's metadata object when there is one), then `etcdutl snapshot restore` lays it out as
the member's data with a cluster token of its own, so the restored cluster gets a new cluster
ID and members of the backed-up cluster can never join it.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import trio

from actors.backup.encoded_store import EncodedStore, encoded, unencoded
from actors.backup.envelope import MAGIC, is_envelope
from actors.backup.point_in_time import plan_point_in_time
from actors.backup.ports import BackupKeySource, BackupResolver, Restored
from actors.backup.restore_checks import (
    check_against_metadata,
    resolve_source,
    restored,
    sha256_checked,
    store_errors_fail_the_restore,
)
from actors.errors import RestoreFailed, StoreError
from actors.model import MemberLaunch, RestoreSpec, StoreSpec
from actors.store_port import ObjectStore
from supervisor.etcd.errors import EtcdError
from supervisor.local.runtime import LocalRuntime
from supervisor.local.scratch import ScratchVerifier, find_etcdutl
from supervisor.runtime import leaf_exceptions
from supervisor.stores.local import READ_CHUNK, LocalDirectoryStore

# Decoded bytes per hand-over between the reading and the writing threads, and how many such
# batches are read ahead of the one being written: memory stays a few batches.
FETCH_BATCH = 4 << 20
FETCH_AHEAD = 2


class LocalRestorer:
    """actors.backup.ports.SeedRestorer for the local runtime."""

    def __init__(
        self,
        runtime: LocalRuntime,
        open_store: Callable[[StoreSpec], ObjectStore],
        resolver: BackupResolver | None = None,
        keys: BackupKeySource | None = None,
    ) -> None:
        self._runtime = runtime
        self._raw_store = open_store
        self._resolver = resolver  # for spec.restore.backupName
        self._keys = keys  # the new cluster's spec.backup.encryption keys decrypt the backup

    def _open_store(self, launch: MemberLaunch, spec: StoreSpec) -> ObjectStore:
        return encoded(self._raw_store(spec), launch.cluster, launch.spec.backup, self._keys)

    async def restore_seed(self, launch: MemberLaunch, source: RestoreSpec) -> Restored:
        store_spec, key, source = await resolve_source(source, launch.cluster, self._resolver, where="daemon")
        member_dir = self._runtime.member_dir(launch.cluster, launch.name)
        if source.revision is not None:
            return await self._restore_to_revision(launch, source, member_dir)
        store = self._open_store(launch, store_spec)
        try:
            with store_errors_fail_the_restore(store_spec, key):
                if await _plain_file(store, key):
                    size, sha256, meta = await self._restore_in_place(launch, store, key)
                else:
                    size, sha256, meta = await self._restore_fetched(launch, store, key, member_dir)
        finally:
            await store.aclose()
        return restored(key, size, sha256, meta)

    async def _restore_fetched(
        self, launch: MemberLaunch, store: ObjectStore, key: str, member_dir: Path
    ) -> tuple[int, str, dict[str, object]]:
        """Fetch the object beside the member, check it, restore it: size, sha256, metadata."""
        snapshot = member_dir / "restore.db"
        try:
            size, sha256 = await _fetch(store, key, snapshot)
            meta = await check_against_metadata(store, key, sha256)
            # Matched the sha256 the backup recorded: etcdutl's own check would read it all again.
            await self._etcdutl_restore(launch, snapshot, checked=sha256_checked(meta))
        finally:
            snapshot.unlink(missing_ok=True)
        return size, sha256, meta

    async def _restore_in_place(
        self, launch: MemberLaunch, store: ObjectStore, key: str
    ) -> tuple[int, str, dict[str, object]]:
        """A local store's plain object is restored from its own file, hashed meanwhile on
        another core: no copy. A sha256 that differs from the metadata's fails the restore
        after the fact (the action then deletes the member, restored data and all)."""
        directory = unencoded(store)
        assert isinstance(directory, LocalDirectoryStore)
        snapshot = await trio.to_thread.run_sync(directory.file_of, key)
        hashed: list[tuple[int, str]] = []

        async def hash_it() -> None:
            try:
                hashed.append(await trio.to_thread.run_sync(_hash_file, snapshot))
            except OSError as exc:
                raise StoreError(f"{directory.describe()}: reading {key}: {exc}") from exc

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hash_it)
                await self._etcdutl_restore(launch, snapshot)
        except BaseExceptionGroup as group:
            raise next(
                (e for e in leaf_exceptions(group) if not isinstance(e, trio.Cancelled)), group
            ) from None
        size, sha256 = hashed[0]
        return size, sha256, await check_against_metadata(store, key, sha256)

    async def _restore_to_revision(
        self, launch: MemberLaunch, source: RestoreSpec, member_dir: Path
    ) -> Restored:
        """The newest verified snapshot at or below the revision, the deltas replayed onto it up
        to the revision in a scratch member (supervisor/local/scratch.py), as the seed."""
        assert source.store is not None and source.key is not None and source.revision is not None
        snapshot, replayed = member_dir / "restore.db", member_dir / "replayed.db"
        store = self._open_store(launch, source.store)
        try:
            plan = await plan_point_in_time(store, source.key, source.revision)
            size, sha256 = await _fetch(store, plan.snapshot_key, snapshot)
            await check_against_metadata(store, plan.snapshot_key, sha256)
        except StoreError as exc:
            raise RestoreFailed(f"backup {source.key} could not be read: {exc}") from exc
        finally:
            await store.aclose()
        try:
            verifier = ScratchVerifier(member_dir, self._runtime.etcd_binary, self._runtime.scratch_ports)
            kv_hash = await verifier.replayed(snapshot, plan.changes, source.revision, out=replayed)
            await self._etcdutl_restore(launch, replayed)
        except (OSError, ValueError, EtcdError) as exc:
            raise RestoreFailed(f"replaying the deltas onto {plan.snapshot_key} failed: {exc}") from exc
        finally:
            snapshot.unlink(missing_ok=True)
            replayed.unlink(missing_ok=True)
        return plan.restored(size, sha256, kv_hash.hash)

    def _etcdutl(self, version: str) -> Path:
        # The cluster's own version restores its seed (3.4 has no etcdutl: its etcdctl does it).
        return self._runtime.builds.etcdutl(version) or find_etcdutl(self._runtime.etcd_binary)

    async def _etcdutl_restore(self, launch: MemberLaunch, snapshot: Path, *, checked: bool = False) -> None:
        """`checked`: the snapshot's sha256 was compared with its metadata's already, so etcdutl
        skips its own pass over the file (it still cuts the trailing checksum off)."""
        data_dir = self._runtime.member_dir(launch.cluster, launch.name) / "data"
        token = f"{launch.cluster.namespace}-{launch.cluster.name}-restored-{secrets.token_hex(4)}"
        argv = [
            str(self._etcdutl(launch.spec.version)), "snapshot", "restore", str(snapshot),
            f"--data-dir={data_dir}", f"--name={launch.name}",
            f"--initial-cluster={launch.initial_cluster_flag()}",
            f"--initial-advertise-peer-urls={launch.urls.peer_url}", f"--initial-cluster-token={token}",
            *(["--skip-hash-check"] if checked else []),
        ]  # fmt: skip
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise RestoreFailed(f"the backup does not restore (etcdutl: {why[0]})")


async def _plain_file(store: ObjectStore, key: str) -> bool:
    """Whether `key` is a plain snapshot in a local directory (restored in place); an encoded
    one is decoded into the member's directory first."""
    directory = unencoded(store)
    if not isinstance(directory, LocalDirectoryStore):
        return False

    def head() -> bytes:
        with directory.file_of(key).open("rb") as f:
            return f.read(len(MAGIC))

    try:
        return not is_envelope(await trio.to_thread.run_sync(head))
    except OSError:
        return False  # the fetch says why, as a store error


async def _fetch(store: ObjectStore, key: str, target: Path) -> tuple[int, str]:
    """The object into `target`: its size and sha256. The next pieces are read (decrypted,
    decompressed) a few ahead in one worker thread while others are hashed and written in
    another, a few segments per hand-over (each one costs the event loop as much as hashing a
    fair part of a segment)."""
    digest, size = hashlib.sha256(), 0
    send, receive = trio.open_memory_channel[list[bytes]](FETCH_AHEAD)

    async def read() -> None:
        async with send:
            if isinstance(store, EncodedStore):
                async for pieces in store.get_batches(key, FETCH_BATCH):
                    await send.send(pieces)
            else:
                async for chunk in store.get_stream(key):
                    await send.send([chunk])

    out = await trio.to_thread.run_sync(target.open, "wb")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            async with receive:
                async for pieces in receive:
                    await trio.to_thread.run_sync(_hash_and_write, out, digest, pieces)
                    size += sum(map(len, pieces))
    except BaseExceptionGroup as group:
        # The store's error (or the write's), not the other side's closed channel.
        leaves = [
            e for e in leaf_exceptions(group) if not isinstance(e, trio.Cancelled | trio.BrokenResourceError)
        ]
        raise (leaves or [group])[0] from None
    finally:
        await trio.to_thread.run_sync(out.close)
    return size, digest.hexdigest()


def _hash_and_write(out: BinaryIO, digest: hashlib._Hash, pieces: list[bytes]) -> None:
    for piece in pieces:
        digest.update(piece)
        out.write(piece)


def _hash_file(path: Path) -> tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as f:
        while chunk := f.read(READ_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()

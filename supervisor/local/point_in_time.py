"""Restore to a revision (spec.restore.revision), local mode: the newest verified snapshot at or
below the revision, plus the delta chunks replayed up to and including it.

The replay runs in a scratch one-member etcd on loopback (as verification does): the snapshot is
restored there, each original revision's changes are applied as one transaction, in order, so
the scratch store's revisions are the original ones (every etcd revision changes at least one
key), and its HashKV at the target revision is what the restored seed must then show. A
snapshot of the scratch becomes the seed's data. Keys written with a lease come back without
it (the lease itself is not in the history).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs
import trio

from actors.backup.deltas import (
    Change,
    changes_up_to,
    chunks_to_replay,
    decode_chunk,
    deltas_prefix,
    parse_chunk_key,
)
from actors.backup.source import metadata_key
from actors.errors import RestoreFailed, StoreError
from actors.model import ClusterRef
from actors.store_port import ObjectStore
from supervisor.etcd.client import EtcdClient, open_etcd_client
from supervisor.etcd.errors import EtcdError
from supervisor.etcd.txn import Delete, Put, TxnOp
from supervisor.local import processes
from supervisor.local.scratch import START_TIMEOUT, ScratchVerifier


@attrs.frozen
class PointInTime:
    """What a point-in-time restore starts from: a snapshot and the changes after it."""

    snapshot_key: str
    snapshot_revision: int
    changes: tuple[Change, ...]


def source_cluster(key: str) -> ClusterRef:
    """The cluster a backup key belongs to: keys are <namespace>/<name>/..."""
    parts = key.split("/")
    if len(parts) < 3:
        raise RestoreFailed(f"{key} is not a backup key of the form <namespace>/<name>/...")
    return ClusterRef(parts[0], parts[1])


async def plan_point_in_time(store: ObjectStore, key: str, revision: int) -> PointInTime:
    """The snapshot and the changes that give exactly the state at `revision`; RestoreFailed
    naming what is missing otherwise."""
    cluster = source_cluster(key)
    folder = f"{cluster.namespace}/{cluster.name}/"
    try:
        snapshots = [o.key for o in await store.list(folder) if o.key.endswith(".db")]
        candidates = []
        for snapshot in snapshots:
            at = await _verified_revision(store, snapshot)
            if at is not None and at <= revision:
                candidates.append((at, snapshot))
        if not candidates:
            raise RestoreFailed(f"no verified snapshot of {cluster} at or below revision {revision}")
        base, snapshot = max(candidates)
        chunks = [c for o in await store.list(deltas_prefix(cluster)) if (c := parse_chunk_key(o.key))]
        try:
            needed = chunks_to_replay(chunks, base, revision)
        except ValueError as exc:
            raise RestoreFailed(f"cannot reach revision {revision} of {cluster}: {exc}") from exc
        changes: list[Change] = []
        for chunk in needed:
            changes += changes_up_to(decode_chunk(await store.get_bytes(chunk.key)), base, revision)
    except StoreError as exc:
        raise RestoreFailed(f"the backups of {cluster} could not be read: {exc}") from exc
    return PointInTime(snapshot, base, tuple(changes))


async def _verified_revision(store: ObjectStore, key: str) -> int | None:
    """The exact revision of a verified snapshot (its metadata); None for any other."""
    try:
        meta = json.loads(await store.get_bytes(metadata_key(key)))
    except (StoreError, ValueError):
        return None
    if not isinstance(meta, dict) or not meta.get("verified") or not isinstance(meta.get("revision"), int):
        return None
    return int(meta["revision"])


async def replay(
    verifier: ScratchVerifier, snapshot: Path, changes: Sequence[Change], target: int, out: Path
) -> int:
    """Replay `changes` onto `snapshot` in a scratch etcd and write its snapshot to `out`;
    returns the scratch's HashKV at `target` (the original revision numbering)."""
    scratch = Path(tempfile.mkdtemp(prefix="replay-", dir=out.parent))
    try:
        peer, client_port = processes.pick_free_ports(2, taken=set())
        # The scratch member of verification, reused: restored with its own token, no peers.
        await verifier._restore(snapshot, scratch / "data", peer)
        async with (
            verifier._serving(scratch, peer, client_port, await _no_fsync(verifier)) as url,
            open_etcd_client([url], call_timeout=30.0) as client,
        ):
            await _wait_serving(client)
            await _apply(client, changes)
            head = await client.current_revision()
            if head != target:
                raise RestoreFailed(f"replaying the deltas reached revision {head}, not {target}")
            found = await client.hash_kv(url, target)
            async with await trio.open_file(out, "wb") as f:

                async def write(piece: bytes) -> None:
                    await f.write(piece)

                await client.snapshot(write, endpoint=url)
        return found.hash
    finally:
        await trio.to_thread.run_sync(lambda: shutil.rmtree(scratch, ignore_errors=True))


async def _no_fsync(verifier: ScratchVerifier) -> tuple[str, ...]:
    """A throwaway member need not fsync each replayed transaction (about 5 ms each here): only
    its final snapshot counts, taken once the replay is done. The flag exists from etcd 3.5 on."""
    done = await trio.run_process([str(verifier._etcd), "--version"], capture_stdout=True, check=False)
    found = re.search(rb"etcd Version: (\d+)\.(\d+)", done.stdout)
    newer = found is not None and (int(found.group(1)), int(found.group(2))) >= (3, 5)
    return ("--unsafe-no-fsync",) if newer else ()


async def _wait_serving(client: EtcdClient) -> None:
    with trio.fail_after(START_TIMEOUT):
        while True:
            try:
                await client.current_revision()
                return
            except EtcdError:
                await trio.sleep(0.1)


async def _apply(client: EtcdClient, changes: Sequence[Change]) -> None:
    """One transaction per original revision, so the revisions come out the same."""
    batch: list[TxnOp] = []
    at = None
    for change in changes:
        if at is not None and change.revision != at:
            await client.txn(success=batch)
            batch = []
        at = change.revision
        batch.append(Put(change.key, change.value) if change.value is not None else Delete(change.key))
    if batch:
        await client.txn(success=batch)

"""Restore to a revision (spec.restore.revision), local mode: the newest verified snapshot at or
below the revision (actors/backup/point_in_time.py), plus the delta chunks replayed up to and
including it.

The replay runs in a scratch one-member etcd on loopback (as verification does): the snapshot is
restored there, each original revision's changes are applied as one transaction, in order, so
the scratch store's revisions are the original ones (every etcd revision changes at least one
key), and its HashKV at the target revision is what the restored seed must then show. A
snapshot of the scratch becomes the seed's data. Keys written with a lease come back with it:
the leases are granted in the scratch with their original IDs and TTLs, and kept alive there
until its snapshot is taken (supervisor/etcd/replay.py).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import trio

from actors.backup.deltas import Change
from supervisor.etcd.client import open_etcd_client
from supervisor.etcd.replay import replaying, wait_serving
from supervisor.local import processes
from supervisor.local.scratch import START_TIMEOUT, ScratchVerifier


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
            with trio.fail_after(START_TIMEOUT):
                await wait_serving(client)
            async with (
                replaying(client, url, changes, target) as kv_hash,
                await trio.open_file(out, "wb") as f,
            ):

                async def write(piece: bytes) -> None:
                    await f.write(piece)

                await client.snapshot(write, endpoint=url)
        return kv_hash
    finally:
        await trio.to_thread.run_sync(lambda: shutil.rmtree(scratch, ignore_errors=True))


async def _no_fsync(verifier: ScratchVerifier) -> tuple[str, ...]:
    """A throwaway member need not fsync each replayed transaction (about 5 ms each here): only
    its final snapshot counts, taken once the replay is done. The flag exists from etcd 3.5 on."""
    done = await trio.run_process([str(verifier._etcd), "--version"], capture_stdout=True, check=False)
    found = re.search(rb"etcd Version: (\d+)\.(\d+)", done.stdout)
    newer = found is not None and (int(found.group(1)), int(found.group(2))) >= (3, 5)
    return ("--unsafe-no-fsync",) if newer else ()

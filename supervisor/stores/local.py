"""The local-directory store: one file per key under a root directory.

Not obstore's LocalStore: it neither fsyncs (a backup that "succeeded" could vanish with a power
cut) nor tells a full disk apart from other failures, and a full disk is a condition we report.
Blocking file calls run in trio's worker threads, one chunk per call.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from typing import IO

import trio

from actors.errors import StoreAccessDenied, StoreError, StoreFull, StoreNotFound
from actors.store_port import ObjectInfo, StoredObject
from supervisor.stores.keys import PARTIAL_MARK, check_key, list_root

READ_CHUNK = 1 << 20

_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_DENIED = {errno.EACCES, errno.EPERM, errno.EROFS}


class LocalDirectoryStore:
    """ObjectStore on a directory; writes are atomic (temporary file, fsync, rename, fsync dir)."""

    def __init__(self, root: Path) -> None:
        self._root = root.absolute()

    def describe(self) -> str:
        return f"local directory {self._root}"

    def file_of(self, key: str) -> Path:
        """The object's own file, for a reader that needs a path (etcdutl restores from one)
        and would otherwise copy it first. Readers must not change it. StoreNotFound if none."""
        path = self._root / check_key(key)
        try:
            _inside(self._root, path)
            if not path.is_file():
                raise FileNotFoundError(errno.ENOENT, "no such object", str(path))
        except OSError as exc:
            raise self._error("get", key, exc) from exc
        return path

    async def put_stream(self, key: str, chunks: AsyncIterable[bytes]) -> StoredObject:
        target = self._root / check_key(key)
        try:
            return await self._write(key, target, chunks)
        except OSError as exc:
            raise self._error("put", key, exc) from exc

    async def put_bytes(self, key: str, data: bytes) -> StoredObject:
        return await self.put_stream(key, _one(data))

    async def get_stream(self, key: str) -> AsyncIterator[bytes]:
        path = self._root / check_key(key)
        try:
            file = await trio.to_thread.run_sync(_open_inside, self._root, path)
            with file:
                while chunk := await trio.to_thread.run_sync(file.read, READ_CHUNK):
                    yield chunk
        except OSError as exc:
            raise self._error("get", key, exc) from exc

    async def get_bytes(self, key: str) -> bytes:
        return b"".join([chunk async for chunk in self.get_stream(key)])

    async def list(self, prefix: str) -> list[ObjectInfo]:
        try:
            return await trio.to_thread.run_sync(_list, self._root, prefix)
        except OSError as exc:
            raise self._error("list", prefix, exc) from exc

    async def delete(self, key: str) -> None:
        path = self._root / check_key(key)
        try:
            await trio.to_thread.run_sync(_delete_inside, self._root, path)
        except OSError as exc:
            raise self._error("delete", key, exc) from exc

    async def aclose(self) -> None:
        pass  # nothing held between calls

    async def _write(self, key: str, target: Path, chunks: AsyncIterable[bytes]) -> StoredObject:
        file, partial = await trio.to_thread.run_sync(_open_partial, self._root, target)
        digest = hashlib.sha256()
        size = 0
        try:
            async for chunk in chunks:
                await write_hashing(file, digest, chunk)
                size += len(chunk)
            await trio.to_thread.run_sync(_commit, file, partial, target)
        except BaseException:
            # Shielded: a cancelled put must not leave its partial file behind.
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_discard, file, partial)
            raise
        return StoredObject(key=key, size=size, sha256=digest.hexdigest())

    def _error(self, operation: str, key: str, exc: OSError) -> StoreError:
        what = f"{self.describe()}: {operation} {key!r}: {exc.strerror or exc}"
        if exc.errno in _FULL:
            return StoreFull(f"{what} (no space left)")
        if exc.errno in _DENIED:
            return StoreAccessDenied(what)
        if exc.errno in (errno.ENOENT, errno.EISDIR, errno.ENOTDIR):
            return StoreNotFound(f"{what} (no such object)")
        return StoreError(what)


async def write_hashing(file: IO[bytes], digest: hashlib._Hash, chunk: bytes) -> None:
    """Write and hash side by side (both release the GIL), so sha256 is not the bound."""
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, digest.update, chunk)
            await trio.to_thread.run_sync(file.write, chunk)
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None  # an OSError (ENOSPC) is mapped as itself
        raise


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _inside(root: Path, path: Path) -> Path:
    """`path`, unless a symlink on the way leads out of the store's directory."""
    if not path.resolve().is_relative_to(root.resolve()):
        raise PermissionError(errno.EACCES, "key leads outside the store's directory", str(path))
    return path


def _open_partial(root: Path, target: Path) -> tuple[IO[bytes], Path]:
    target.parent.mkdir(parents=True, exist_ok=True)
    _inside(root, target.parent)
    partial = target.parent / f"{PARTIAL_MARK}{secrets.token_hex(6)}-{target.name}"
    return open(partial, "xb"), partial  # closed by _commit or _discard


def _commit(file: IO[bytes], partial: Path, target: Path) -> None:
    file.flush()
    os.fsync(file.fileno())
    file.close()
    os.replace(partial, target)
    # The rename is durable only once the directory entry is.
    fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(file: IO[bytes], partial: Path) -> None:
    file.close()
    partial.unlink(missing_ok=True)


def _open_inside(root: Path, path: Path) -> IO[bytes]:
    return open(_inside(root, path), "rb")  # the caller closes it


def _delete_inside(root: Path, path: Path) -> None:
    if path.parent.exists():
        _inside(root, path.parent)
    path.unlink(missing_ok=True)


def _list(root: Path, prefix: str) -> list[ObjectInfo]:
    found = []
    for directory, _, files in os.walk(root / list_root(prefix)):
        for name in files:
            if name.startswith(PARTIAL_MARK):
                continue
            path = Path(directory, name)
            key = path.relative_to(root).as_posix()
            if key.startswith(prefix):
                stat = path.stat()
                found.append(ObjectInfo(key=key, size=stat.st_size, modified=stat.st_mtime))
    return sorted(found, key=lambda info: info.key)

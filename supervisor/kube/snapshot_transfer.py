"""Moving a snapshot from the operator into a pod: the pod listens, the operator pushes.

Why this way: the cluster's own etcd image (distroless: etcd, etcdctl, etcdutl and nothing
else) has no shell and no HTTP or S3 client, so it cannot fetch a snapshot by itself. The
operator already holds the store's credentials and reads the backup back from the store (that
read-back is what verification must prove), so it streams those bytes to the pod, and no
credential ever leaves the operator. It pushes, rather than the pod pulling, because the
operator must reach pods anyway (it talks to every member), while pods need no route to it.
The receiving end is the operator's own image, run as the pod's first init container
(`etcd-supervisor receive-snapshot`); the etcd containers after it read the file it wrote.

With TLS on for the cluster, the connection is TLS: the pod presents the cluster's member
certificate (from the cluster's Secret) and the operator checks it against the cluster's CA, so
the snapshot (every key of the cluster) never crosses the pod network in the clear.

Wire format, on one TCP connection (TLS or not): a token line (so only the operator that made the pod can
fill it), then frames of <4-byte big-endian length><bytes>, a zero-length frame at the end.
The receiver answers "<size> <sha256>\\n" once the file is complete and synced, and exits. A
connection that ends without the last frame is discarded and the receiver waits for another.
"""

from __future__ import annotations

import hashlib
import logging
import os
import ssl
import struct
from collections.abc import AsyncIterable
from pathlib import Path

import trio
from attrs import frozen

log = logging.getLogger(__name__)

RECEIVE_PORT = 2390
_LENGTH = struct.Struct(">I")
_MAX_FRAME = 8 << 20
_MAX_TOKEN = 256


class TransferFailed(Exception):
    """The snapshot did not reach the pod whole; the message says why."""


@frozen
class Received:
    size: int
    sha256: str


class _Reader:
    """Exact reads from a trio stream (receive_some returns what happens to be there)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = bytearray()

    async def exactly(self, n: int) -> bytes | None:
        while len(self._buffer) < n:
            data = await self._stream.receive_some(max(65536, n - len(self._buffer)))
            if not data:
                return None  # the sender went away early
            self._buffer += data
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        return out

    async def line(self) -> bytes | None:
        while b"\n" not in self._buffer:
            if len(self._buffer) > _MAX_TOKEN:
                return None
            data = await self._stream.receive_some(_MAX_TOKEN)
            if not data:
                return None
            self._buffer += data
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return line


# --- the pod's side ------------------------------------------------------------------------------


def server_tls(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """The receiving pod's side of TLS: it presents the cluster's member certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert_file), str(key_file))
    return context


def client_tls(ca_file: Path) -> ssl.SSLContext:
    """The operator's side: only a pod holding a certificate of the cluster's CA gets the bytes."""
    return ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca_file))


async def receive_snapshot(
    out: Path, *, port: int, token: str, tls: ssl.SSLContext | None = None
) -> Received:
    """Listen on `port` until one connection with `token` delivers a whole snapshot into `out`."""
    listeners = await trio.open_tcp_listeners(port)
    try:
        while True:
            tcp = await listeners[0].accept()
            stream: trio.abc.Stream = tcp if tls is None else trio.SSLStream(tcp, tls, server_side=True)
            async with stream:
                received = await _receive_one(stream, out, token)
                if received is not None:
                    await stream.send_all(f"{received.size} {received.sha256}\n".encode())
                    return received
    finally:
        for listener in listeners:
            await listener.aclose()


async def _receive_one(stream: trio.abc.Stream, out: Path, token: str) -> Received | None:
    reader = _Reader(stream)
    try:
        if await reader.line() != token.encode():
            log.warning("a connection without the right token was turned away")
            return None
        return await _write_frames(reader, out)
    except (trio.BrokenResourceError, OSError) as exc:
        log.warning("snapshot transfer broke off: %s", exc)
        return None


async def _write_frames(reader: _Reader, out: Path) -> Received | None:
    digest, size = hashlib.sha256(), 0
    async with await trio.open_file(out, "wb") as f:
        while True:
            header = await reader.exactly(_LENGTH.size)
            if header is None:
                return None
            (length,) = _LENGTH.unpack(header)
            if length == 0:
                break
            if length > _MAX_FRAME:
                return None
            chunk = await reader.exactly(length)
            if chunk is None:
                return None
            digest.update(chunk)
            size += len(chunk)
            await f.write(chunk)
        await f.flush()
        await trio.to_thread.run_sync(os.fsync, f.fileno())
    return Received(size, digest.hexdigest())


# --- the operator's side -------------------------------------------------------------------------


async def push_snapshot(
    host: str,
    token: str,
    chunks: AsyncIterable[bytes],
    *,
    port: int = RECEIVE_PORT,
    connect_within: float = 120.0,
    tls: ssl.SSLContext | None = None,
    server_name: str | None = None,
) -> Received:
    """Send `chunks` to a receiver; returns what was sent, once the receiver confirmed the same.

    The receiver may still be starting: connecting is retried for `connect_within` seconds
    (before a single chunk is read, so the stream is consumed once). With `tls`, the receiver's
    certificate must be valid for `server_name` (the pod is reached by IP). Raises TransferFailed.
    """
    stream = await _connect(host, port, connect_within, tls, server_name)
    digest, size = hashlib.sha256(), 0
    try:
        async with stream:
            await stream.send_all(token.encode() + b"\n")
            async for chunk in chunks:
                for start in range(0, len(chunk), _MAX_FRAME):
                    part = chunk[start : start + _MAX_FRAME]
                    digest.update(part)
                    size += len(part)
                    await stream.send_all(_LENGTH.pack(len(part)) + part)
            await stream.send_all(_LENGTH.pack(0))
            answer = await _Reader(stream).line()
    except trio.BrokenResourceError as exc:  # the receiver hung up: a wrong token, or it died
        raise TransferFailed(f"the pod at {host}:{port} broke off the transfer: {exc}") from exc
    sent = Received(size, digest.hexdigest())
    if answer is None:
        raise TransferFailed(f"the pod at {host}:{port} closed the transfer without confirming it")
    if answer != f"{sent.size} {sent.sha256}".encode():
        raise TransferFailed(
            f"the pod received {answer!r}; {sent.size} bytes, sha256 {sent.sha256} were sent"
        )
    return sent


async def _connect(
    host: str, port: int, within: float, tls: ssl.SSLContext | None, server_name: str | None
) -> trio.abc.Stream:
    deadline = trio.current_time() + within
    while True:
        try:
            tcp = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            if trio.current_time() >= deadline:
                raise TransferFailed(f"nothing listens at {host}:{port} after {within:.0f}s: {exc}") from exc
            await trio.sleep(0.2)
            continue
        if tls is None:
            return tcp
        secured = trio.SSLStream(tcp, tls, server_hostname=server_name or host)
        try:
            await secured.do_handshake()
        except trio.BrokenResourceError as exc:  # a certificate not of the cluster's CA, say
            await tcp.aclose()
            raise TransferFailed(f"TLS with the pod at {host}:{port} failed: {exc.__cause__ or exc}") from exc
        return secured

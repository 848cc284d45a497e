"""The Maintenance/Snapshot call on an HTTP/2 connection of its own, read straight from a trio socket.

Why not grpclib, which carries every other call: etcd's server (grpc-go) sends DATA frames of at
most 16 KiB, so a 300 MiB snapshot is ~28,000 frames, and h2 + grpclib spend ~40 µs of Python
on each (frame objects, the stream state machine, flow-control bookkeeping, an asyncio queue,
the hop from asyncio to trio): ~1.2 s of one core, more than `etcdctl snapshot save` takes for
the whole snapshot. This reader does only what one call with one request and a stream of
answers needs, ~8 µs a frame with its copies, and no asyncio at all:

- it sends the client preface, its SETTINGS (no server push, large windows so etcd never waits
  for us), the request's HEADERS (HPACK by the hpack library, as h2 does) and its one empty
  message, then reads frames;
- DATA frames of the stream are gRPC messages (5-byte prefix, then a SnapshotResponse), whose
  blobs are handed on in pieces of about 1 MiB; windows are topped up every half window read,
  and only once a piece was taken, so a slow sink slows etcd down (never memory growth);
- SETTINGS and PING are acknowledged, GOAWAY/RST_STREAM end it with a connection error, and the
  trailers' grpc-status becomes our typed error (errors.error_from_status), as with grpclib.

`SnapshotStreamParser` is the protocol without I/O (tested on crafted frames); `read_snapshot`
connects and runs it.
"""

from __future__ import annotations

import ssl
import struct
from collections.abc import Awaitable, Callable
from urllib.parse import unquote

import hpack
import trio

from .addresses import KNOWN, UNADDRESSED
from .errors import EtcdConnectionError, EtcdError, EtcdTlsError, error_from_status
from .snapshot_wire import SNAPSHOT_METHOD, SnapshotChunk
from .transport import ChannelPool, Endpoint, Metadata, translate

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
STREAM = 1  # the one stream of the connection

# Frame types and flags (RFC 9113, section 6).
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE = range(9)
CONTINUATION = 9
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
SETTINGS_ENABLE_PUSH = 0x2
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
DEFAULT_WINDOW = 65_535
MAX_FRAME = 16_384  # SETTINGS_MAX_FRAME_SIZE's default, which we keep: etcd sends no larger

# Large windows let etcd stream without waiting for our WINDOW_UPDATEs.
WINDOW = 64 * 1024 * 1024
# Hand the blob on in pieces of about this size (etcd's messages are 32 KiB).
PIECE = 1024 * 1024
RECEIVE_SIZE = 1024 * 1024
# A message larger than this is not a snapshot chunk: refuse it rather than buffer it.
MAX_MESSAGE = 16 * 1024 * 1024

# 24-bit length (as 8 + 16 bits), type, flags, stream id (with the reserved bit).
_FRAME_HEADER = struct.Struct(">BHBBI")
_MESSAGE_PREFIX = struct.Struct(">BI")  # compressed?, length


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    size = len(payload)
    return _FRAME_HEADER.pack(size >> 16, size & 0xFFFF, kind, flags, stream) + payload


def request(endpoint: Endpoint, metadata: Metadata, timeout: float) -> bytes:
    """Everything the client sends before it reads: preface, settings, windows, the call."""
    settings = struct.pack(">HIHI", SETTINGS_ENABLE_PUSH, 0, SETTINGS_INITIAL_WINDOW_SIZE, WINDOW)
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    headers = [
        (":method", "POST"),
        (":scheme", "https" if endpoint.secure else "http"),
        (":path", SNAPSHOT_METHOD),
        (":authority", f"{host}:{endpoint.port}"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("grpc-timeout", f"{min(max(int(timeout * 1000), 1), 99_999_999)}m"),
        *metadata.items(),
    ]
    return b"".join(
        [
            PREFACE,
            frame(SETTINGS, 0, 0, settings),
            frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", WINDOW - DEFAULT_WINDOW)),
            frame(HEADERS, END_HEADERS, STREAM, hpack.Encoder().encode(headers)),
            frame(DATA, END_STREAM, STREAM, _MESSAGE_PREFIX.pack(0, 0)),  # the empty SnapshotRequest
        ]
    )


class SnapshotStreamParser:
    """The server's side of the connection, bytes in, snapshot pieces and our replies out."""

    def __init__(self, url: str = "", *, piece_size: int = PIECE) -> None:
        self._url = url
        self._piece_size = piece_size
        self._buffer: bytes | bytearray = b""  # an incomplete frame
        self._message = bytearray()  # gRPC message bytes not yet complete
        self._blobs: list[bytes | memoryview] = []  # of the piece being gathered
        self._blobs_size = 0
        self._pieces: list[bytes] = []
        self._replies: list[bytes] = []
        self._unacknowledged = 0  # DATA bytes read since the last WINDOW_UPDATE
        self._header_block = bytearray()
        self._header_ends_stream = False
        self._decoder = hpack.Decoder()
        self._responded = False  # the response's headers came
        self.revision = 0  # from the first message's header
        self.finished = False  # the trailers came, with status OK

    def receive(self, data: bytes | bytearray) -> tuple[bytes, list[bytes]]:
        """Take bytes from the server: what to send back, and the pieces of snapshot completed
        (the last one comes with the trailers). Raises EtcdError when the call failed."""
        buffer = self._buffer + data if self._buffer else data
        view = memoryview(buffer)
        pos, end = 0, len(buffer)
        while end - pos >= 9 and not self.finished:
            high, low, kind, flags, stream = _FRAME_HEADER.unpack_from(buffer, pos)
            length = (high << 16) | low
            if length > MAX_FRAME:
                raise self._broken(f"a frame of {length} bytes, more than the {MAX_FRAME} allowed")
            if end - pos - 9 < length:
                break
            body = view[pos + 9 : pos + 9 + length]
            pos += 9 + length
            if kind == DATA:
                self._data(flags, stream & 0x7FFFFFFF, body)
            else:
                self._control(kind, flags, stream & 0x7FFFFFFF, body)
        self._buffer = buffer[pos:]
        if self._unacknowledged >= WINDOW // 2 and not self.finished:
            increment = struct.pack(">I", self._unacknowledged)
            for stream in (0, STREAM):  # the connection's window and the stream's
                self._replies.append(frame(WINDOW_UPDATE, 0, stream, increment))
            self._unacknowledged = 0
        replies, pieces = b"".join(self._replies), self._pieces
        self._replies, self._pieces = [], []
        return replies, pieces

    # ---- DATA: the gRPC messages

    def _data(self, flags: int, stream: int, body: memoryview) -> None:
        if stream != STREAM:
            raise self._broken(f"DATA on stream {stream}")
        self._unacknowledged += len(body)
        if flags & PADDED:
            body = _unpadded(body)
        self._message += body
        self._take_messages()
        if flags & END_STREAM:
            raise self._broken("the stream ended without a gRPC status")

    def _take_messages(self) -> None:
        message = self._message
        while len(message) >= 5:
            compressed, size = _MESSAGE_PREFIX.unpack_from(message)
            if compressed:
                raise self._broken("a compressed message, which was not asked for")
            if size > MAX_MESSAGE:
                raise self._broken(f"a message of {size} bytes")
            if len(message) < 5 + size:
                return
            chunk = SnapshotChunk.FromString(bytes(memoryview(message)[5 : 5 + size]))
            del message[: 5 + size]
            if not self.revision:
                self.revision = chunk.revision
            self._blobs.append(chunk.blob)
            self._blobs_size += len(chunk.blob)
            if self._blobs_size >= self._piece_size:
                self._flush()

    def _flush(self) -> None:
        if self._blobs_size:
            self._pieces.append(b"".join(self._blobs))
        self._blobs, self._blobs_size = [], 0

    # ---- everything else

    def _control(self, kind: int, flags: int, stream: int, body: memoryview) -> None:
        if kind in (HEADERS, CONTINUATION):
            self._headers(kind, flags, stream, body)
        elif kind == SETTINGS and not flags & ACK:
            self._replies.append(frame(SETTINGS, ACK, 0))
        elif kind == PING and not flags & ACK:
            self._replies.append(frame(PING, ACK, 0, bytes(body)))
        elif kind == RST_STREAM and stream == STREAM:
            (code,) = struct.unpack_from(">I", body)
            raise self._broken(f"etcd reset the stream (HTTP/2 error code {code})")
        elif kind == GOAWAY:
            last_stream, code = struct.unpack_from(">II", body)
            if code or (last_stream & 0x7FFFFFFF) < STREAM:
                raise self._broken(f"etcd closed the connection (GOAWAY, HTTP/2 error code {code})")
        elif kind == PUSH_PROMISE:
            raise self._broken("a server push, which was refused")
        # PRIORITY, WINDOW_UPDATE (we send one small message), acknowledgements, unknown types: nothing to do

    def _headers(self, kind: int, flags: int, stream: int, body: memoryview) -> None:
        if stream != STREAM:
            raise self._broken(f"headers on stream {stream}")
        if kind == HEADERS:
            if flags & PADDED:
                body = _unpadded(body)
            if flags & PRIORITY_FLAG:
                body = body[5:]
            self._header_block = bytearray(body)
            self._header_ends_stream = bool(flags & END_STREAM)
        else:
            self._header_block += body
        if flags & END_HEADERS:
            decoded = self._decoder.decode(bytes(self._header_block))
            self._header_list({str(name): str(value) for name, value in decoded})

    def _header_list(self, headers: dict[str, str]) -> None:
        if not self._responded:
            self._responded = True
            if headers.get(":status") != "200":
                raise self._broken(f"HTTP status {headers.get(':status')} instead of 200")
        if not self._header_ends_stream:
            return
        status = headers.get("grpc-status")
        if status is None or not status.isdigit():
            raise self._broken(f"the stream ended with no gRPC status (trailers {sorted(headers)})")
        if int(status):
            raise error_from_status(int(status), unquote(headers.get("grpc-message", "")), endpoint=self._url)
        self._flush()
        self.finished = True

    def _broken(self, what: str) -> EtcdConnectionError:
        return EtcdConnectionError(f"snapshot stream: {what}", endpoint=self._url)


def _unpadded(body: memoryview) -> memoryview:
    pad = body[0] if body else 0
    return body[1 : len(body) - pad]


async def read_snapshot(
    pool: ChannelPool,
    endpoint: Endpoint,
    sink: Callable[[bytes], Awaitable[None]],
    *,
    metadata: Metadata,
    deadline_seconds: float,
) -> int:
    """Stream a snapshot of the member at `endpoint` into `sink`, piece by piece; the revision
    of its first header. The caller bounds the time; `deadline_seconds` travels to etcd."""
    try:
        stream = await _connect(pool, endpoint)
        async with stream:
            await stream.send_all(request(endpoint, metadata, deadline_seconds))
            parser = SnapshotStreamParser(endpoint.url)
            while not parser.finished:
                data = await stream.receive_some(RECEIVE_SIZE)
                if not data:
                    raise _closed_early(pool, endpoint)
                replies, pieces = parser.receive(data)
                if replies:
                    await stream.send_all(replies)
                for piece in pieces:
                    await sink(piece)
            return parser.revision
    except (OSError, trio.BrokenResourceError, ssl.SSLError) as exc:
        raise _typed(exc, pool, endpoint) from exc


async def _connect(pool: ChannelPool, endpoint: Endpoint) -> trio.abc.Stream:
    address = KNOWN.lookup(endpoint.host)
    if address == UNADDRESSED:
        raise EtcdConnectionError("the member's pod has no address yet", endpoint=endpoint.url)
    tcp = await trio.open_tcp_stream(address or endpoint.host, endpoint.port)
    if not endpoint.secure:
        return tcp
    secure = trio.SSLStream(tcp, pool.ssl_context(), server_hostname=pool.server_name or endpoint.host)
    try:
        await secure.do_handshake()
        if secure.selected_alpn_protocol() != "h2":
            raise EtcdConnectionError("the server does not speak HTTP/2 over TLS", endpoint=endpoint.url)
    except BaseException:
        await trio.aclose_forcefully(secure)
        raise
    return secure


def _closed_early(pool: ChannelPool, endpoint: Endpoint) -> EtcdError:
    if endpoint.secure and not pool.presents_client_certificate:
        # A TLS 1.3 server that wants a client certificate says so only by hanging up.
        why = "the TLS server closed the connection; it may require a client certificate"
        return EtcdTlsError(why, endpoint=endpoint.url)
    return EtcdConnectionError("connection closed before the snapshot ended", endpoint=endpoint.url)


def _typed(exc: BaseException, pool: ChannelPool, endpoint: Endpoint) -> EtcdError:
    # trio reports a failed TLS stream as BrokenResourceError caused by the ssl error.
    cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
    typed = translate(cause, endpoint, pool)
    return typed or EtcdConnectionError(f"connection failed: {exc!r}", endpoint=endpoint.url)

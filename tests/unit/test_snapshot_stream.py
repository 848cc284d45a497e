"""The snapshot stream's HTTP/2 reader on frames built by hyperframe and hpack (h2's own libraries),
so the reader is checked against an independent encoder of the protocol."""

from __future__ import annotations

import struct
from urllib.parse import quote

import hpack
import pytest
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

from supervisor.etcd import NotAuthenticated
from supervisor.etcd.errors import EtcdConnectionError
from supervisor.etcd.snapshot_stream import WINDOW, SnapshotStreamParser, request
from supervisor.etcd.transport import Endpoint


def response(blob: bytes, revision: int = 0) -> bytes:
    """A SnapshotResponse: header (field 1, with revision as its field 3), blob (field 3)."""
    header = b"\x18" + _varint(revision) if revision else b""
    body = (b"\x0a" + _varint(len(header)) + header if header else b"") + b"\x1a" + _varint(len(blob)) + blob
    return struct.pack(">BI", 0, len(body)) + body


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def data_frames(messages: bytes, pad: int | None = None) -> list[Frame]:
    """DATA frames as large as HTTP/2's default maximum allows (16 KiB, padding included)."""
    frames = []
    size = 16384 - (pad + 1 if pad is not None else 0)
    for start in range(0, len(messages), size):
        f = DataFrame(1, data=messages[start : start + size])
        if pad is not None:
            f.flags.add("PADDED")
            f.pad_length = pad
        frames.append(f)
    return frames


def headers(encoder: hpack.Encoder, fields: list[tuple[str, str]], *, end_stream: bool) -> HeadersFrame:
    f = HeadersFrame(1, data=encoder.encode(fields))
    f.flags.add("END_HEADERS")
    if end_stream:
        f.flags.add("END_STREAM")
    return f


def feed(parser: SnapshotStreamParser, frames: list[Frame], split: int = 7000) -> tuple[bytes, list[bytes]]:
    """Give the parser the serialised frames in arbitrary slices, as a socket would."""
    wire = b"".join(f.serialize() for f in frames)
    replies, pieces = [], []
    for start in range(0, len(wire), split):
        reply, got = parser.receive(wire[start : start + split])
        replies.append(reply)
        pieces += got
    return b"".join(replies), pieces


OK_RESPONSE = [(":status", "200"), ("content-type", "application/grpc")]
OK_TRAILERS = [("grpc-status", "0"), ("grpc-message", "")]


def test_blobs_arrive_whole_in_pieces_with_the_revision() -> None:
    encoder = hpack.Encoder()
    blobs = [bytes([i]) * 32768 for i in range(70)]
    messages = b"".join(response(b, revision=41 if i == 0 else 99) for i, b in enumerate(blobs))
    frames = [
        SettingsFrame(0, settings={SettingsFrame.MAX_CONCURRENT_STREAMS: 100}),
        headers(encoder, OK_RESPONSE, end_stream=False),
        PingFrame(0, opaque_data=b"12345678"),
        *data_frames(messages, pad=3),
        headers(encoder, OK_TRAILERS, end_stream=True),
    ]
    parser = SnapshotStreamParser(piece_size=1024 * 1024)
    replies, pieces = feed(parser, frames)
    assert parser.finished and parser.revision == 41
    assert b"".join(pieces) == b"".join(blobs)
    assert [len(p) for p in pieces] == [32 * 32768, 32 * 32768, 6 * 32768]  # the rest with the trailers
    # The server's SETTINGS and PING were acknowledged (ACK flag, the same opaque data).
    assert SettingsFrame(0, flags=["ACK"]).serialize() in replies
    assert PingFrame(0, flags=["ACK"], opaque_data=b"12345678").serialize() in replies


def test_windows_are_topped_up_every_half_window() -> None:
    encoder = hpack.Encoder()
    blob = b"x" * (1024 * 1024)
    messages = response(blob) * (WINDOW // 2 // len(blob) + 1)
    parser = SnapshotStreamParser()
    frames = [headers(encoder, OK_RESPONSE, end_stream=False), *data_frames(messages)]
    replies, _ = feed(parser, frames, 1 << 20)
    updates = [WindowUpdateFrame(s, window_increment=_read_increment(replies)).serialize() for s in (0, 1)]
    assert replies == b"".join(updates)
    assert _read_increment(replies) >= WINDOW // 2


def _read_increment(replies: bytes) -> int:
    assert replies[3] == 8  # WINDOW_UPDATE
    return int(struct.unpack_from(">I", replies, 9)[0])


def test_an_error_in_the_trailers_is_the_typed_error_with_its_message() -> None:
    # Trailers only (no response headers first, no data), as etcd answers a refused call; the
    # header block split over HEADERS + CONTINUATION; grpc-message percent-encoded.
    fields = [*OK_RESPONSE, ("grpc-status", "3"), ("grpc-message", quote("etcdserver: user name is empty"))]
    block = hpack.Encoder().encode(fields)
    first, rest = HeadersFrame(1, data=block[:5]), ContinuationFrame(1, data=block[5:])
    first.flags.add("END_STREAM")
    rest.flags.add("END_HEADERS")
    parser = SnapshotStreamParser("http://m0:2379")
    with pytest.raises(NotAuthenticated, match="user name is empty") as raised:
        feed(parser, [first, rest])
    assert raised.value.endpoint == "http://m0:2379"


@pytest.mark.parametrize(
    ("frames", "why"),
    [
        ([RstStreamFrame(1, error_code=2)], "reset the stream"),
        ([GoAwayFrame(0, last_stream_id=0, error_code=0)], "GOAWAY"),
        ([GoAwayFrame(0, last_stream_id=1, error_code=11)], "GOAWAY"),
        ([DataFrame(1, data=response(b"x"), flags=["END_STREAM"])], "without a gRPC status"),
        ([DataFrame(1, data=b"\x01\x00\x00\x00\x01z")], "compressed"),
        ([DataFrame(3, data=response(b"x"))], "DATA on stream 3"),
    ],
)
def test_a_broken_stream_is_a_connection_error(frames: list[Frame], why: str) -> None:
    parser = SnapshotStreamParser()
    feed(parser, [headers(hpack.Encoder(), OK_RESPONSE, end_stream=False)])
    with pytest.raises(EtcdConnectionError, match=why):
        feed(parser, frames)


def test_a_graceful_goaway_lets_the_stream_finish() -> None:
    encoder = hpack.Encoder()
    frames = [
        headers(encoder, OK_RESPONSE, end_stream=False),
        GoAwayFrame(0, last_stream_id=1, error_code=0),
        *data_frames(response(b"tail")),
        headers(encoder, OK_TRAILERS, end_stream=True),
    ]
    parser = SnapshotStreamParser()
    _, pieces = feed(parser, frames, split=3)
    assert parser.finished and pieces == [b"tail"]


def test_the_request_is_one_grpc_call_with_its_metadata() -> None:
    sent = request(Endpoint.parse("https://10.0.0.1:2379"), {"token": "abc"}, 12.5)
    assert sent.startswith(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    frames, rest = [], memoryview(sent)[24:]
    while rest:
        f, length = Frame.parse_frame_header(rest[:9])
        f.parse_body(rest[9 : 9 + length])
        frames.append(f)
        rest = rest[9 + length :]
    settings, window, head, data = frames
    assert settings.settings == {SettingsFrame.ENABLE_PUSH: 0, SettingsFrame.INITIAL_WINDOW_SIZE: WINDOW}
    assert window.stream_id == 0 and window.window_increment == WINDOW - 65535
    fields = dict(hpack.Decoder().decode(head.data))
    assert fields[":path"] == "/etcdserverpb.Maintenance/Snapshot"
    assert (fields[":scheme"], fields[":authority"]) == ("https", "10.0.0.1:2379")
    assert (fields["token"], fields["grpc-timeout"], fields["te"]) == ("abc", "12500m", "trailers")
    assert "END_STREAM" in data.flags and data.data == b"\0\0\0\0\0"

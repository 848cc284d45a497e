"""The format of a compressed and/or encrypted backup object (pure: bytes in, bytes out).

Compress, then encrypt, in segments, so neither side ever holds more than a few segments of a
multi-GiB snapshot, and each segment is checked before any of it is used:

    header   30 bytes, big-endian:
             magic      8  b"\\x89ESBK\\r\\n\\x1a" (never the start of an etcd snapshot, a delta
                           chunk's JSON, nor a zstd frame: old plain objects are told apart)
             version    1  1
             flags      1  bit 0: segments are zstd frames; bit 1: segments are AES-256-GCM sealed
             segment    4  plaintext bytes per segment (1 MiB); the last one may hold fewer, even 0
             key id     8  actors/backup/keys.py key_id (zeros when not encrypted)
             nonce pfx  8  random per object (zeros when not encrypted)
    records  one per segment, in order:
             length     4  bit 31: this is the final record; bits 0-30: the body's length
             body          the segment as one zstd frame (its content size written in it), then,
                           when encrypted, sealed: AES-256-GCM with nonce = nonce prefix ||
                           record index (4 bytes), associated data = header || final flag (1 byte)

A segment of a sealed object that does not compress (a sample of it does not shrink: random
values, already compressed data) is written as a frame of raw blocks, built without running the
compressor and without a frame checksum, which GCM's tag makes redundant: still one zstd frame
with its content size, which every reader decompresses as any other (no change of format).

Sealing each record under its index and the header detects reordered records and an edited
header; the final flag in the associated data detects an object cut at a record boundary (its
last record was sealed as not final); a missing final record is refused as truncated. A zstd
frame is decompressed only when its declared size fits a segment, so a hostile object cannot
expand in memory. Independent frames cost a little ratio (a window never spans segments).
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections import deque
from collections.abc import Callable, Sequence

import zstandard
from attrs import frozen
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from actors.backup.keys import KEY_ID_BYTES, BackupKey, KeyRing
from actors.errors import BackupCorrupt, BackupDecryptFailed, BackupEncodingError

MAGIC = b"\x89ESBK\r\n\x1a"
VERSION = 1
# What the metadata object beside a snapshot says of it (job.describe).
FORMAT = f"esbk/{VERSION}"
ALGORITHM = "AES-256-GCM"
ZSTD = 0x01
SEALED = 0x02
SEGMENT = 1 << 20
MAX_SEGMENT = 64 << 20  # a header asking for more is refused (memory)
# Level 1: about twice level 3's speed for a few percent more bytes (measured on etcd-like
# JSON: bench/bench_backup_crypto.py); a backup holds a member's read transaction meanwhile.
ZSTD_LEVEL = 1
NONCE_PREFIX = 8
TAG = 16
_HEADER = struct.Struct(f">8sBBI{KEY_ID_BYTES}s{NONCE_PREFIX}s")
HEADER_SIZE = _HEADER.size
_LENGTH = struct.Struct(">I")
_FINAL = 1 << 31
_INDEX = struct.Struct(">I")
# A segment whose sample compresses to more than this share of it is stored raw (sealed only).
RAW_ABOVE = 0.9
SAMPLES, SAMPLE = 4, 4096  # windows spread over the segment, bytes each
# A zstd frame of raw blocks (RFC 8878, 3.1.1): magic; descriptor 0xA0 = a 4-byte content
# size, single segment (no window descriptor), no checksum, no dictionary; then blocks of at
# most 128 KiB, each a 3-byte little-endian header (last flag, type 0 = raw, size << 3).
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_RAW_FRAME = struct.Struct("<4sBI")
_RAW_BLOCK = 128 * 1024
RAW_PIECES = 4  # a segment in more pieces than this is joined before it is framed

Piece = bytes | memoryview


def is_envelope(head: bytes | bytearray) -> bool:
    """Whether an object starting with `head` (at least len(MAGIC) bytes, or all of it) is in
    this format; anything else is a plain object, stored as given."""
    return bytes(head[: len(MAGIC)]) == MAGIC


def _max_body(segment: int) -> int:
    # zstd's worst case for incompressible data, plus the frame's header and checksum and the tag.
    return segment + segment // 128 + 512 + TAG


@frozen
class Header:
    flags: int
    segment: int
    key_id: bytes
    nonce_prefix: bytes
    raw: bytes

    @property
    def compressed(self) -> bool:
        return bool(self.flags & ZSTD)

    @property
    def encrypted(self) -> bool:
        return bool(self.flags & SEALED)


def parse_header(data: bytes | bytearray, what: str) -> Header:
    """The header at the start of `data` (at least HEADER_SIZE bytes); BackupCorrupt when it
    is not one this version writes."""
    raw = bytes(data[:HEADER_SIZE])
    if len(raw) < HEADER_SIZE or not is_envelope(raw):
        raise BackupCorrupt(f"{what}: truncated before the end of its header")
    _, version, flags, segment, kid, prefix = _HEADER.unpack(raw)
    if version != VERSION or flags & ~(ZSTD | SEALED) or not 0 < segment <= MAX_SEGMENT:
        raise BackupCorrupt(
            f"{what}: header of format version {version}, flags {flags:#x}, segment {segment}: "
            f"not one this supervisor reads (version {VERSION})"
        )
    return Header(flags, segment, kid, prefix, raw)


def _nonce(prefix: bytes, index: int) -> bytes:
    return prefix + _INDEX.pack(index)


class Encoder:
    """Plain bytes in, the stored object out. Feed it any sizes; `finish` once. Counts the size
    and sha256 of what it was given (a snapshot's, compared with etcd's own).

    What it is fed is held as it is, not copied (copied only when it could change: a bytearray),
    until a segment's worth is there."""

    def __init__(
        self,
        *,
        compress: bool,
        key: BackupKey | None,
        segment: int = SEGMENT,
        level: int = ZSTD_LEVEL,
        random: Callable[[int], bytes] = os.urandom,
    ) -> None:
        flags = (ZSTD if compress else 0) | (SEALED if key else 0)
        kid = key.id if key else bytes(KEY_ID_BYTES)
        prefix = random(NONCE_PREFIX) if key else bytes(NONCE_PREFIX)
        self._header = _HEADER.pack(MAGIC, VERSION, flags, segment, kid, prefix)
        self.key_id = key.id.hex() if key else None  # what the metadata records
        self._prefix = prefix
        self._key = key.key if key else None
        # Each segment a frame of its own with its size written in: the reader checks the size
        # before decompressing. The checksum lets `zstd -t` tell a damaged frame, too.
        self._zstd = zstandard.ZstdCompressor(level=level, write_checksum=True) if compress else None
        self._segment = segment
        self._pending: deque[memoryview] = deque()
        self._pending_size = 0
        self._index = 0
        self._started = False
        self.size = 0
        self._sha256 = hashlib.sha256()
        self.raw_segments = 0  # stored raw, not compressed (they did not compress)

    @property
    def sha256(self) -> str:
        return self._sha256.hexdigest()

    def feed(self, data: bytes | bytearray | memoryview) -> bytes:
        """The stored bytes ready so far (whole records; a full segment waits until more comes,
        since only the last one is sealed as final)."""
        self._sha256.update(data)
        self.size += len(data)
        view = memoryview(data)
        if len(view):
            self._pending.append(view if view.readonly else memoryview(bytes(view)))
            self._pending_size += len(view)
        out: list[bytes] = [self._start()] if not self._started else []
        while self._pending_size > self._segment:
            out.append(self._record(self._take(self._segment), final=False))
        return out[0] if len(out) == 1 else b"".join(out)

    def finish(self, data: bytes | bytearray = b"") -> bytes:
        """The rest of the object, `data` included: the last record, sealed as final."""
        out = self.feed(data) if data else self._start()
        last = self._record(self._take(self._pending_size), final=True)
        return b"".join((out, last))

    def _start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        return self._header

    def _take(self, size: int) -> list[memoryview]:
        """The next `size` pending bytes, as the pieces they are in (none copied)."""
        parts: list[memoryview] = []
        while size:
            head = self._pending[0]
            if len(head) <= size:
                parts.append(self._pending.popleft())
            else:
                parts.append(head[:size])
                self._pending[0] = head[size:]
            size -= len(parts[-1])
            self._pending_size -= len(parts[-1])
        return parts

    def _record(self, parts: list[memoryview], *, final: bool) -> bytes:
        if self._key is not None and self._index >= 1 << 32:
            raise BackupEncodingError("an object of over 2^32 segments cannot be sealed")
        if self._key is not None and self._zstd is not None and not _compresses(parts, self._zstd):
            self.raw_segments += 1
            body: Sequence[Piece] = _raw_frame(parts)
        elif self._zstd is not None:
            body = [self._zstd.compress(parts[0] if len(parts) == 1 else b"".join(parts))]
        else:
            body = parts
        if self._key is None:
            record = b"".join((_LENGTH.pack(sum(map(len, body)) | (_FINAL if final else 0)), *body))
        else:
            record = _sealed(
                self._key, _nonce(self._prefix, self._index), self._header + bytes([final]), body, final
            )
        self._index += 1
        return record


def _compresses(parts: Sequence[memoryview], zstd: zstandard.ZstdCompressor) -> bool:
    """Whether a segment looks worth compressing: a few windows spread over it, compressed
    together, shrink below RAW_ABOVE (a few percent of the cost of compressing it all)."""
    size = sum(map(len, parts))
    if size <= SAMPLES * SAMPLE:
        return True  # small enough to just compress
    whole = parts[0] if len(parts) == 1 else None
    windows = []
    for i in range(SAMPLES):
        at = (size - SAMPLE) * i // (SAMPLES - 1)
        windows.append(whole[at : at + SAMPLE] if whole is not None else _slice(parts, at, SAMPLE))
    sample = b"".join(windows)
    return len(zstd.compress(sample)) < len(sample) * RAW_ABOVE


def _slice(parts: Sequence[memoryview], at: int, size: int) -> bytes:
    """Bytes at..at+size of the pieces taken together."""
    out = bytearray()
    for part in parts:
        if at < len(part) and len(out) < size:
            out += part[at : at + size - len(out)]
        at = max(0, at - len(part))
    return bytes(out)


def _raw_frame(parts: Sequence[memoryview]) -> list[Piece]:
    """The pieces as one zstd frame of raw blocks, their bytes not copied when they are a few
    large pieces (as a snapshot's are)."""
    size = sum(map(len, parts))
    out: list[Piece] = [_RAW_FRAME.pack(_ZSTD_MAGIC, 0xA0, size)]
    if len(parts) > RAW_PIECES:
        # Many small pieces would make as many small blocks, 3 bytes each: joined, the frame
        # stays within what a reader allows a record (_max_body), as a compressor's would.
        parts = [memoryview(b"".join(parts))]
    # Each block within one piece: where a piece ends, so does a block.
    blocks = [view for part in parts for view in _split(part, _RAW_BLOCK)]
    for i, block in enumerate(blocks):
        last = 1 if i == len(blocks) - 1 else 0
        out += [(last | len(block) << 3).to_bytes(3, "little"), block]
    if not blocks:
        out.append((1).to_bytes(3, "little"))  # an empty last block: the empty segment
    return out


def _split(part: memoryview, size: int) -> list[memoryview]:
    return [part[at : at + size] for at in range(0, len(part), size)]


def _sealed(key: bytes, nonce: bytes, associated: bytes, body: Sequence[Piece], final: bool) -> bytes:
    """One record: the length word, then `body` (its pieces in order) encrypted straight into
    the record's buffer, then the tag: AES-256-GCM, as AESGCM.encrypt would seal the joined body.
    The pieces are never joined: the one copy is the record made bytes, as stores are given."""
    size = sum(map(len, body))
    record = bytearray(_LENGTH.size + size + TAG)
    _LENGTH.pack_into(record, 0, (size + TAG) | (_FINAL if final else 0))
    encryptor = Cipher(algorithms.AES(key), modes.GCM(nonce)).encryptor()
    encryptor.authenticate_additional_data(associated)
    at = _LENGTH.size
    with memoryview(record) as into:
        for piece in body:
            # update_into wants room for a block more than it writes: the tag's room gives it.
            at += encryptor.update_into(piece, into[at:])
        encryptor.finalize()
        into[at:] = encryptor.tag
    return bytes(record)


class Decoder:
    """The stored object in (header first), plain bytes out: each record authenticated (when
    sealed) and decompressed whole before any of it is returned. `what` names the object in
    every error. Memory: at most one record's input and one segment's output beyond what it
    is fed."""

    def __init__(self, header: Header, ring: KeyRing, what: str) -> None:
        self._header = header
        self._what = what
        self._aead = AESGCM(ring.by_id(header.key_id, what).key) if header.encrypted else None
        self._zstd = zstandard.ZstdDecompressor() if header.compressed else None
        self._limit = _max_body(header.segment)
        self._buffer = bytearray()
        self._skip = HEADER_SIZE  # the header is in the first bytes fed
        self._index = 0
        self._done = False

    def _broken(self, why: str) -> BackupEncodingError:
        error = BackupDecryptFailed if self._aead else BackupCorrupt
        return error(f"{self._what}: {why}")

    def feed(self, data: bytes | bytearray) -> bytes:
        """Everything `data` completes, decoded (a small object, or a test)."""
        self.push(data)
        return self.take()

    def push(self, data: bytes | bytearray) -> None:
        """More of the object, kept until taken."""
        self._buffer += data
        if self._skip:
            taken = min(self._skip, len(self._buffer))
            del self._buffer[:taken]
            self._skip -= taken

    def take(self, limit: int | None = None) -> bytes:
        """The records pushed so far, decoded, stopping once `limit` bytes are out (so a
        highly compressed stretch is never decompressed at once); b"" when no whole record is
        left."""
        out = self.take_segments(limit)
        return out[0] if len(out) == 1 else b"".join(out)

    def take_segments(self, limit: int | None = None) -> list[bytes]:
        """take's records as they are decoded, one segment each, not joined."""
        out: list[bytes] = []
        size = at = 0  # at: where the next record starts in the buffer
        try:
            while len(self._buffer) - at >= _LENGTH.size and (limit is None or size < limit):
                (word,) = _LENGTH.unpack_from(self._buffer, at)
                final, length = bool(word & _FINAL), word & ~_FINAL
                if length > self._limit:
                    raise self._broken(f"record {self._index} claims {length} bytes: corrupt")
                start = at + _LENGTH.size
                if len(self._buffer) < start + length:
                    break
                if self._done:
                    raise self._broken("bytes after the final record")
                # Opened where it lies (decryption and decompression write new bytes anyway).
                with memoryview(self._buffer) as buffer, buffer[start : start + length] as body:
                    out.append(self._open(body, final))
                at = start + length
                size += len(out[-1])
                self._done = final
        finally:
            del self._buffer[:at]  # once, not after every record
        return out

    @property
    def ready(self) -> bool:
        """Whether a whole record is pushed and not yet taken (take would decode it)."""
        if len(self._buffer) < _LENGTH.size:
            return False
        (word,) = _LENGTH.unpack_from(self._buffer)
        length = word & ~_FINAL
        return length > self._limit or len(self._buffer) >= _LENGTH.size + length  # take refuses the first

    def finish(self) -> bytes:
        if self._skip:
            raise self._broken("truncated before the end of its header")
        if self._buffer:
            raise self._broken(f"truncated inside record {self._index}")
        if not self._done:
            raise self._broken(f"truncated: it ends after record {self._index - 1} without its final record")
        return b""

    def _open(self, record: memoryview, final: bool) -> bytes:
        body: bytes | memoryview = record
        if self._aead is not None:
            try:
                body = self._aead.decrypt(
                    _nonce(self._header.nonce_prefix, self._index), record, self._header.raw + bytes([final])
                )
            except InvalidTag:
                raise self._broken(
                    f"record {self._index} does not authenticate under key id {self._header.key_id.hex()}: "
                    "the object is corrupt, truncated, reordered or was tampered with"
                ) from None
        self._index += 1
        if self._zstd is None:
            return bytes(body)
        try:
            size = zstandard.frame_content_size(body)
            if not 0 <= size <= self._header.segment:
                raise self._broken(f"record {self._index - 1} declares {size} bytes, over a segment")
            plain = self._zstd.decompress(body)
        except zstandard.ZstdError as exc:
            raise self._broken(f"record {self._index - 1} is not a zstd frame: {exc}") from exc
        if len(plain) != size:
            raise self._broken(f"record {self._index - 1} holds {len(plain)} bytes, not {size}")
        return plain


def encode(data: bytes, *, compress: bool, key: BackupKey | None) -> tuple[bytes, Encoder]:
    """A small object (a delta chunk) encoded whole, and the encoder that says what it did."""
    encoder = Encoder(compress=compress, key=key)
    return encoder.finish(data), encoder


def decode(data: bytes, ring: KeyRing, what: str) -> bytes:
    """A small object decoded whole; plain objects as they are."""
    if not is_envelope(data):
        return data
    decoder = Decoder(parse_header(data, what), ring, what)
    return decoder.feed(data) + decoder.finish()

"""The backup object format (actors/backup/envelope.py) and its keys (actors/backup/keys.py):
round trips in every form, and every way an object can be wrong refused by name."""

from __future__ import annotations

import base64
import hashlib
import os
import struct

import pytest
import zstandard
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given
from hypothesis import strategies as st

from actors.backup.envelope import (
    HEADER_SIZE,
    MAGIC,
    Decoder,
    Encoder,
    decode,
    encode,
    is_envelope,
    parse_header,
)
from actors.backup.health import BackupReport, backup_condition, encoding_problem
from actors.backup.keys import KeyRing, key_id, key_ring_from, no_keys
from actors.errors import BackupCorrupt, BackupDecryptFailed, BackupKeyInvalid, BackupKeyMissing
from actors.model import BackupSpec, BackupStatus, LocalStore, StoreSpec

SEGMENT = 64  # small segments: many records from little data
OLD = base64.b64encode(bytes(range(32))).decode()
NEW = base64.b64encode(bytes(range(100, 132))).decode()


def ring(**values: str) -> KeyRing:
    return key_ring_from(values, "test keys")


def stored(data: bytes, *, compress: bool = True, keys: KeyRing | None = None, piece: int = 50) -> bytes:
    """`data` encoded, fed in pieces of `piece` bytes (never aligned with segments)."""
    encoder = Encoder(compress=compress, key=keys.current() if keys else None, segment=SEGMENT)
    out = [encoder.feed(data[i : i + piece]) for i in range(0, len(data), piece)]
    return b"".join(out) + encoder.finish()


def records(blob: bytes) -> list[bytes]:
    """The records of an object, each with its length word."""
    out, at = [], HEADER_SIZE
    while at < len(blob):
        (word,) = struct.unpack_from(">I", blob, at)
        end = at + 4 + (word & 0x7FFFFFFF)
        out.append(blob[at:end])
        at = end
    return out


@given(
    data=st.binary(max_size=600),
    compress=st.booleans(),
    encrypt=st.booleans(),
    piece=st.integers(1, 200),
)
def test_every_form_round_trips_whatever_the_sizes(
    data: bytes, compress: bool, encrypt: bool, piece: int
) -> None:
    keys = ring(key=NEW) if encrypt else None
    blob = stored(data, compress=compress, keys=keys, piece=piece)
    assert is_envelope(blob)
    decoder = Decoder(parse_header(blob, "obj"), keys or no_keys(""), "obj")
    out = [decoder.feed(blob[i : i + piece]) for i in range(0, len(blob), piece)]
    assert b"".join(out) + decoder.finish() == data


def test_exact_multiples_of_a_segment_and_empty_input_round_trip() -> None:
    keys = ring(key=NEW)
    for data in (b"", b"x" * SEGMENT, b"y" * (3 * SEGMENT)):
        assert decode(stored(data, keys=keys), keys, "obj") == data


def test_the_encoder_counts_what_it_was_given() -> None:
    data = os.urandom(1000)
    blob, encoder = encode(data, compress=True, key=ring(key=NEW).current())
    assert encoder.size == len(data)
    assert encoder.sha256 == hashlib.sha256(data).hexdigest()
    assert encoder.key_id == key_id(base64.b64decode(NEW)).hex()
    assert decode(blob, ring(key=NEW), "obj") == data


def test_compression_shrinks_and_sealing_hides_the_plaintext() -> None:
    data = b"etcd key value " * 5000
    blob, _ = encode(data, compress=True, key=ring(key=NEW).current())
    assert len(blob) < len(data) / 10
    sealed_only, _ = encode(data, compress=False, key=ring(key=NEW).current())
    assert b"etcd key value" not in sealed_only


def test_plain_objects_are_not_envelopes_and_decode_as_they_are() -> None:
    for plain in (bytes(4096), b'{"revision": 1}\n', b"", b"\x28\xb5\x2f\xfd zstd"):
        assert not is_envelope(plain)
        assert decode(plain, no_keys(""), "obj") == plain


def test_a_truncated_object_is_refused() -> None:
    keys = ring(key=NEW)
    blob = stored(os.urandom(300), keys=keys)
    kept = records(blob)
    # Cut at a record boundary: the last record left was sealed as not final.
    cut = blob[:HEADER_SIZE] + b"".join(kept[:-1])
    with pytest.raises(BackupDecryptFailed, match="final record"):
        decode(cut, keys, "obj")
    # Its length word marked final by hand: it was sealed as not final, so it fails to open.
    last = kept[-2]
    forged = last[:0] + struct.pack(">I", struct.unpack(">I", last[:4])[0] | 1 << 31) + last[4:]
    with pytest.raises(BackupDecryptFailed, match="does not authenticate"):
        decode(blob[:HEADER_SIZE] + b"".join(kept[:-2]) + forged, keys, "obj")
    with pytest.raises(BackupDecryptFailed, match="truncated inside"):
        decode(blob[:-5], keys, "obj")
    with pytest.raises(BackupCorrupt, match="header"):
        decode(blob[: HEADER_SIZE - 1], keys, "obj")


def test_a_truncated_compressed_object_is_refused_too() -> None:
    blob = stored(os.urandom(300), compress=True)
    cut = blob[:HEADER_SIZE] + b"".join(records(blob)[:-1])
    with pytest.raises(BackupCorrupt, match="final record"):
        decode(cut, no_keys(""), "obj")


def test_reordered_records_are_refused() -> None:
    keys = ring(key=NEW)
    blob = stored(os.urandom(300), keys=keys)
    first, second, *rest = records(blob)
    with pytest.raises(BackupDecryptFailed, match="record 0 does not authenticate"):
        decode(blob[:HEADER_SIZE] + second + first + b"".join(rest), keys, "obj")


def test_a_flipped_bit_or_an_edited_header_is_refused() -> None:
    keys = ring(key=NEW)
    blob = bytearray(stored(os.urandom(300), keys=keys))
    flipped = bytearray(blob)
    flipped[HEADER_SIZE + 10] ^= 1
    with pytest.raises(BackupDecryptFailed, match="record 0"):
        decode(bytes(flipped), keys, "obj")
    uncompressed = bytearray(blob)
    uncompressed[9] &= ~0x01  # the flags: "not compressed"
    with pytest.raises(BackupDecryptFailed):
        decode(bytes(uncompressed), keys, "obj")


def test_an_unknown_key_is_missing_by_name_with_the_ids_there_are() -> None:
    blob = stored(b"secret data", keys=ring(key=OLD))
    with pytest.raises(BackupKeyMissing, match=f"key id {key_id(base64.b64decode(OLD)).hex()}") as caught:
        decode(blob, ring(key=NEW), "ns/demo/x.db")
    assert str(caught.value).startswith("BackupKeyMissing: ns/demo/x.db")
    with pytest.raises(BackupKeyMissing):
        decode(blob, no_keys("no spec.backup.encryption"), "obj")


def test_rotation_an_old_key_under_another_name_still_decrypts() -> None:
    before = stored(b"taken before the rotation", keys=ring(key=OLD))
    rotated = ring(key=NEW, previous=OLD)
    after = stored(b"taken after", keys=rotated)
    assert decode(before, rotated, "obj") == b"taken before the rotation"
    assert decode(after, rotated, "obj") == b"taken after"
    assert parse_header(after, "obj").key_id == key_id(base64.b64decode(NEW))


def test_keys_that_are_not_32_bytes_of_base64_are_invalid_by_name() -> None:
    with pytest.raises(BackupKeyInvalid, match="'key' is 16 bytes"):
        ring(key=base64.b64encode(bytes(16)).decode())
    with pytest.raises(BackupKeyInvalid, match="'old' is not base64"):
        ring(key=NEW, old="not base64!")
    with pytest.raises(BackupKeyMissing, match="has no 'key'"):
        ring(old=OLD).current()


def test_a_header_of_another_version_is_refused() -> None:
    blob = bytearray(stored(b"x"))
    blob[len(MAGIC)] = 9
    with pytest.raises(BackupCorrupt, match="version 9"):
        decode(bytes(blob), no_keys(""), "obj")


def test_a_frame_claiming_more_than_a_segment_is_refused_before_decompressing() -> None:
    big, _ = encode(bytes(10 * SEGMENT), compress=True, key=None)  # one frame of 640 bytes
    header = bytearray(big[:HEADER_SIZE])
    header[10:14] = struct.pack(">I", SEGMENT)  # the reader is told segments are 64 bytes
    with pytest.raises(BackupCorrupt, match="over a segment"):
        decode(bytes(header) + big[HEADER_SIZE:], no_keys(""), "obj")


def opened_frames(blob: bytes, keys: KeyRing) -> list[bytes]:
    """Each record of a sealed object decrypted: the zstd frame it holds."""
    header = parse_header(blob, "obj")
    aead = AESGCM(keys.by_id(header.key_id, "obj").key)
    out = []
    for index, record in enumerate(records(blob)):
        final = bool(struct.unpack(">I", record[:4])[0] >> 31)
        nonce = header.nonce_prefix + struct.pack(">I", index)
        out.append(aead.decrypt(nonce, record[4:], header.raw + bytes([final])))
    return out


def test_sealed_segments_that_do_not_compress_are_stored_raw_and_read_as_any_frame() -> None:
    keys = ring(key=NEW)
    segment = 256 * 1024
    random_part, text_part = os.urandom(2 * segment), b"/registry/pods/default/web-%05d " * 30_000
    data = random_part + text_part[: 2 * segment] + os.urandom(1000)
    encoder = Encoder(compress=True, key=keys.current(), segment=segment)
    # Fed in pieces that straddle segments, one of them a bytearray changed once fed.
    piece = bytearray(data[:100_000])
    blob = encoder.feed(piece)
    piece[:] = bytes(len(piece))
    blob = bytes(blob) + b"".join(
        bytes(encoder.feed(data[i : i + 300_000])) for i in range(100_000, len(data), 300_000)
    )
    blob += encoder.finish()

    frames = opened_frames(blob, keys)
    params = [zstandard.get_frame_parameters(frame) for frame in frames]
    # The random segments as raw blocks: no compressor, no checksum (GCM authenticates them),
    # the content size written as in every frame. Text is compressed, and so is a last segment
    # too short to sample (1000 bytes).
    assert [p.has_checksum for p in params] == [False, False, True, True, True]
    assert [p.content_size for p in params] == [segment] * 4 + [1000]
    # The frame header, then blocks of at most 128 KiB, each within one piece fed: 100,000 bytes
    # of the first piece, then 131,072 + 31,072 of the second.
    assert len(frames[0]) == segment + 9 + 3 * 3
    assert encoder.raw_segments == 2 and len(frames[2]) < segment / 10
    # Any zstd reader reads them; so does the decoder, in pieces of any size.
    assert b"".join(zstandard.ZstdDecompressor().decompress(f) for f in frames) == data
    decoder = Decoder(parse_header(blob, "obj"), keys, "obj")
    assert b"".join(decoder.feed(blob[i : i + 70_000]) for i in range(0, len(blob), 70_000)) == data
    decoder.finish()


def test_raw_segments_fed_in_small_pieces_stay_within_what_a_reader_allows() -> None:
    keys = ring(key=NEW)
    data = os.urandom(3 * 256 * 1024)
    encoder = Encoder(compress=True, key=keys.current(), segment=256 * 1024)
    blob = b"".join(bytes(encoder.feed(data[i : i + 100])) for i in range(0, len(data), 100))
    blob += encoder.finish()
    assert encoder.raw_segments == 3
    # A 3-byte block header per 100-byte piece would be 3 % more than a segment, over the
    # reader's allowance (zstd's bound for what does not compress: 1/128 more, plus 512).
    assert max(len(r) for r in records(blob)) <= 4 + 256 * 1024 + 9 + 3 * 2 + 16
    assert decode(blob, keys, "obj") == data


def test_a_compressed_object_without_a_key_keeps_the_checksum_of_every_frame() -> None:
    blob, encoder = encode(os.urandom(600_000), compress=True, key=None)
    assert encoder.raw_segments == 0
    assert zstandard.get_frame_parameters(records(blob)[0][4:]).has_checksum


def test_key_problems_turn_backup_healthy_false_at_once_by_name() -> None:
    spec = BackupSpec(store=StoreSpec(local=LocalStore("b")))
    try:
        try:
            decode(stored(b"x", keys=ring(key=OLD)), ring(key=NEW), "obj")
        except BackupKeyMissing as exc:
            raise RuntimeError("the verification failed") from exc
    except RuntimeError as exc:
        reason = encoding_problem(exc)
    assert reason == "BackupKeyMissing"
    report = BackupReport(BackupStatus(None, None, 1), "BackupKeyMissing: ...", reason)
    condition = backup_condition(spec, report, 0.0)
    assert (condition.status, condition.reason) == ("False", "BackupKeyMissing")
    assert encoding_problem(ValueError("other")) == ""

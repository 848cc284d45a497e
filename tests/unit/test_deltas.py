"""Delta chunks (pure): names that sort by revision, a lossless encoding, and the history's
continuity judged from the names alone."""

import pytest

from actors.backup.deltas import (
    Change,
    ChunkRef,
    changes_up_to,
    chunk_key,
    chunks_to_replay,
    covered_to,
    decode_chunk,
    encode_chunk,
    parse_chunk_key,
)
from actors.backup.leases import LEASE_GONE
from actors.model import ClusterRef

C = ClusterRef("default", "demo")


def chunk(first, last):
    return ChunkRef(chunk_key(C, first, last), first, last)


def test_chunk_keys_sort_by_revision_and_parse_back():
    keys = [chunk_key(C, 9, 10), chunk_key(C, 11, 100), chunk_key(C, 101, 1000)]
    assert (
        sorted(keys) == keys
        and keys[0] == "default/demo/deltas/00000000000000000009-00000000000000000010.jsonl"
    )
    assert parse_chunk_key(keys[1]) == ChunkRef(keys[1], 11, 100)
    assert parse_chunk_key("default/demo/20260101T000000Z-rev5.db") is None


def test_a_chunk_keeps_puts_deletes_leases_and_any_bytes():
    changes = [
        Change(5, b"\x00k\xff", b"v\n1", lease=7, lease_ttl=30),
        Change(6, b"gone", None),
        Change(7, b"e", b""),
        Change(8, b"l", b"v", lease=9, lease_ttl=LEASE_GONE),
    ]
    assert decode_chunk(encode_chunk(changes)) == changes
    assert decode_chunk(encode_chunk([])) == []


def test_a_chunk_written_before_leases_were_recorded_still_decodes():
    old = b'{"rev":5,"key":"aw==","value":"dg==","lease":7}\n{"rev":6,"key":"aw==","delete":true}\n'
    assert decode_chunk(old) == [Change(5, b"k", b"v", lease=7), Change(6, b"k", None)]
    assert decode_chunk(old)[0].lease_ttl is None  # not recorded: unknown, not gone


def test_continuity_and_what_to_replay():
    chunks = [chunk(11, 20), chunk(21, 35), chunk(40, 50)]  # revisions 36..39 are missing
    assert covered_to(chunks, 10) == 35 and covered_to(chunks, 38) == 38 and covered_to(chunks, 39) == 50
    assert chunks_to_replay(chunks, 15, 30) == chunks[:2]
    assert chunks_to_replay(chunks, 20, 21) == [chunks[1]]
    assert chunks_to_replay(chunks, 30, 30) == []
    with pytest.raises(ValueError, match="no delta backup holds revision 36"):
        chunks_to_replay(chunks, 15, 45)
    changes = [Change(r, b"k", b"%d" % r) for r in (14, 15, 16, 30, 31)]
    assert [c.revision for c in changes_up_to(changes, 15, 30)] == [16, 30]

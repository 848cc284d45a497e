"""Compressed and encrypted objects (actors/backup/encoded_store.py) on every real store: a
local directory, moto's S3 server and fake-gcs-server. What is stored is the envelope, what is
read back is what was put; keys are named when they are missing, memory stays flat."""

from __future__ import annotations

import base64
import hashlib
import os
import random
from collections.abc import AsyncIterator, Callable

import pytest

from actors.backup.encoded_store import EncodedStore, Encoding, encoded
from actors.backup.envelope import is_envelope
from actors.backup.keys import KeyRing, key_id, key_ring_from, no_keys
from actors.errors import BackupDecryptFailed, BackupKeyMissing
from actors.model import BackupSpec, ClusterRef, Compression, EncryptionSpec, LocalStore, StoreSpec
from actors.store_port import ObjectStore
from tests.harness.memory import reset_peak, status_kib
from tests.stores.data import MiB, drain

OLD, NEW = os.urandom(32), os.urandom(32)
REF = ClusterRef("default", "demo")


def keys(**values: bytes) -> KeyRing:
    return key_ring_from({k: base64.b64encode(v).decode() for k, v in values.items()}, "test keys")


def wrapped(
    store: ObjectStore, ring: KeyRing | None, compression: Compression = Compression.ZSTD
) -> EncodedStore:
    async def load() -> KeyRing:
        return ring or no_keys("no keys in this test")

    return EncodedStore(store, Encoding(compression, "backup-key" if ring else None), load)


async def compressible(size: int, *, chunk: int = 300_000) -> AsyncIterator[bytes]:
    """etcd-like pages: keys and values that repeat, with some noise; odd chunk sizes."""
    rng = random.Random(size)  # the same bytes at each call
    page = b"".join(b"/registry/pods/ns-%05d/pod-%05d" % (i, i * 7) + rng.randbytes(24) for i in range(200))
    left = size
    while left > 0:
        n = min(chunk, left)
        yield (page * (n // len(page) + 1))[:n]
        left -= n


async def collect(stream: AsyncIterator[bytes]) -> bytes:
    return b"".join([piece async for piece in stream])


@pytest.mark.parametrize(
    ("compression", "encrypt"),
    [(Compression.ZSTD, True), (Compression.ZSTD, False), (Compression.NONE, True)],
)
async def test_streamed_objects_round_trip_in_every_form(
    make_store: Callable[..., ObjectStore], compression: Compression, encrypt: bool
) -> None:
    raw = make_store()
    store = wrapped(raw, keys(key=NEW) if encrypt else None, compression)
    expected = hashlib.sha256(await collect(compressible(9 * MiB))).hexdigest()
    stored = await store.put_stream("ns/demo/snap.db", compressible(9 * MiB))
    assert stored.content == (9 * MiB, expected)
    assert stored.key_id == (key_id(NEW).hex() if encrypt else None)
    assert stored.compression == compression.value
    # The stored bytes are the envelope, and the recorded sha256 is theirs.
    size, sha256 = await drain(raw.get_stream("ns/demo/snap.db"))
    assert (size, sha256) == (stored.size, stored.sha256)
    if compression is Compression.ZSTD:
        assert stored.size < 9 * MiB / 2
    head = await raw.get_bytes("ns/demo/snap.db")
    assert is_envelope(head)
    assert await drain(store.get_stream("ns/demo/snap.db")) == (9 * MiB, expected)
    await store.aclose()


async def test_chunks_are_encoded_and_metadata_stays_plain(make_store: Callable[..., ObjectStore]) -> None:
    raw = make_store()
    store = wrapped(raw, keys(key=NEW))
    chunk = b'{"revision": 5, "key": "a2V5"}\n' * 100
    await store.put_bytes("ns/demo/deltas/1-5.jsonl", chunk)
    await store.put_bytes("ns/demo/snap.db.json", b'{"verified": true}')
    assert is_envelope(await raw.get_bytes("ns/demo/deltas/1-5.jsonl"))
    assert await raw.get_bytes("ns/demo/snap.db.json") == b'{"verified": true}'
    assert await store.get_bytes("ns/demo/deltas/1-5.jsonl") == chunk
    await store.aclose()


async def test_old_plain_objects_read_as_they_are(make_store: Callable[..., ObjectStore]) -> None:
    raw = make_store()
    plain = bytes(4096) + os.urandom(3 * MiB)  # a bbolt file starts with zeros
    await raw.put_bytes("ns/demo/old.db", plain)
    await raw.put_bytes("ns/demo/deltas/1-2.jsonl", b"{}\n")
    store = wrapped(raw, keys(key=NEW))
    assert await collect(store.get_stream("ns/demo/old.db")) == plain
    assert await store.get_bytes("ns/demo/deltas/1-2.jsonl") == b"{}\n"
    await store.aclose()


async def test_rotation_and_a_missing_key_by_name(make_store: Callable[..., ObjectStore]) -> None:
    raw = make_store()
    await wrapped(raw, keys(key=OLD)).put_stream("ns/demo/before.db", compressible(2 * MiB))
    rotated = wrapped(raw, keys(key=NEW, previous=OLD))
    assert (await drain(rotated.get_stream("ns/demo/before.db")))[0] == 2 * MiB
    with pytest.raises(BackupKeyMissing, match=key_id(OLD).hex()):
        await drain(wrapped(raw, keys(key=NEW)).get_stream("ns/demo/before.db"))
    # A cluster without spec.backup.encryption cannot read it either, and says why.
    with pytest.raises(BackupKeyMissing, match="names no keySecret"):
        await drain(wrapped(raw, None).get_stream("ns/demo/before.db"))


async def test_a_damaged_object_fails_by_name_before_its_bad_bytes_are_used(
    make_store: Callable[..., ObjectStore],
) -> None:
    raw = make_store()
    store = wrapped(raw, keys(key=NEW))
    await store.put_stream("ns/demo/snap.db", compressible(3 * MiB))
    blob = bytearray(await raw.get_bytes("ns/demo/snap.db"))
    blob[len(blob) // 2] ^= 0x01
    await raw.put_bytes("ns/demo/snap.db", bytes(blob))
    with pytest.raises(BackupDecryptFailed, match="does not authenticate"):
        await drain(store.get_stream("ns/demo/snap.db"))


async def test_a_key_file_that_is_missing_fails_the_put_before_reading(tmp_path) -> None:
    """The local key source (supervisor/local/backups.py): a file next to the manifest."""
    from supervisor.local.backups import LocalKeyFiles
    from supervisor.stores import open_store

    spec = BackupSpec(
        store=StoreSpec(local=LocalStore(str(tmp_path / "b"))), encryption=EncryptionSpec("backup-key")
    )
    assert spec.store is not None
    store = encoded(open_store(spec.store, credentials=None), REF, spec, LocalKeyFiles(tmp_path))
    taken = []

    async def never() -> AsyncIterator[bytes]:
        taken.append(1)
        yield b"x"

    with pytest.raises(BackupKeyMissing, match="backup-key"):
        await store.put_stream("ns/demo/a.db", never())
    assert not taken
    (tmp_path / "backup-key").write_text(f"key={base64.b64encode(NEW).decode()}\n# old=...\n")
    stored = await store.put_stream("ns/demo/a.db", compressible(MiB))
    assert stored.key_id == key_id(NEW).hex()
    (tmp_path / "backup-key").write_text("key=c2hvcnQ=\n")
    fresh = encoded(open_store(spec.store, credentials=None), REF, spec, LocalKeyFiles(tmp_path))
    with pytest.raises(Exception, match=r"BackupKeyInvalid: keySecret 'backup-key'.*'key' is 5 bytes"):
        await drain(fresh.get_stream("ns/demo/a.db"))


async def test_encoding_holds_a_few_segments_never_the_object(
    make_store: Callable[..., ObjectStore], store_kind: str
) -> None:
    store = wrapped(make_store(), keys(key=NEW))
    size = 64 * MiB
    before = reset_peak()
    await store.put_stream("big.db", compressible(size))
    put = status_kib("VmHWM") - before
    before = reset_peak()
    assert (await drain(store.get_stream("big.db")))[0] == size
    get = status_kib("VmHWM") - before
    growth = f"peak RSS growth put {put // 1024} MiB, get {get // 1024} MiB"
    print(f"{store_kind}: 64 MiB compressed+encrypted, {growth}")
    assert max(put, get) * 1024 < size // 2, (put, get)

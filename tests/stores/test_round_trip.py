"""Every store, against the real thing: streamed objects come back byte-equal; list, delete, prefix."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import trio

from actors.errors import StoreNotFound
from actors.store_port import ObjectStore
from tests.stores.data import MiB, chunks, drain, sha256_of

# Bigger than one multipart part (8 MiB), and not a multiple of it.
BIG = 19 * MiB + 12345


async def test_a_streamed_multi_mib_object_comes_back_byte_equal(
    make_store: Callable[..., ObjectStore],
) -> None:
    store = make_store()
    stored = await store.put_stream("etcd/demo/big.db", chunks(BIG, seed=7))
    expected = await sha256_of(BIG, seed=7)
    assert (stored.key, stored.size, stored.sha256) == ("etcd/demo/big.db", BIG, expected)
    assert await drain(store.get_stream("etcd/demo/big.db")) == (BIG, expected)
    await store.aclose()


async def test_small_objects_and_empty_streams(make_store: Callable[..., ObjectStore]) -> None:
    store = make_store()
    meta = await store.put_bytes("etcd/demo/big.db.json", b'{"revision": 42}')
    assert meta.size == 16
    assert await store.get_bytes("etcd/demo/big.db.json") == b'{"revision": 42}'
    empty = await store.put_stream("empty", chunks(0))
    assert (empty.size, empty.sha256) == (0, await sha256_of(0))
    assert await store.get_bytes("empty") == b""


async def test_list_filters_by_string_prefix_and_delete_is_idempotent(
    make_store: Callable[..., ObjectStore],
) -> None:
    store = make_store()
    for key in ("etcd/demo/1.db", "etcd/demo/2.db", "etcd/demo-2/1.db", "other/x"):
        await store.put_bytes(key, key.encode())
    listed = await store.list("etcd/demo/")
    assert [(i.key, i.size) for i in listed] == [("etcd/demo/1.db", 14), ("etcd/demo/2.db", 14)]
    assert all(i.modified > 1.7e9 for i in listed)
    # A plain string prefix, not a directory: "etcd/demo" also matches "etcd/demo-2/...".
    assert [i.key for i in await store.list("etcd/demo")] == [
        "etcd/demo-2/1.db",
        "etcd/demo/1.db",
        "etcd/demo/2.db",
    ]
    assert len(await store.list("")) == 4

    await store.delete("etcd/demo/1.db")
    await store.delete("etcd/demo/1.db")  # idempotent
    assert [i.key for i in await store.list("etcd/demo/")] == ["etcd/demo/2.db"]
    with pytest.raises(StoreNotFound, match="no such object"):
        await store.get_bytes("etcd/demo/1.db")
    with pytest.raises(StoreNotFound, match="no such object"):
        await drain(store.get_stream("etcd/demo/1.db"))


async def test_the_store_prefix_keeps_stores_apart(make_store: Callable[..., ObjectStore]) -> None:
    first, second = make_store("team-a/"), make_store("team-b/")
    await first.put_bytes("k", b"a")
    await second.put_bytes("k", b"b")
    assert await first.get_bytes("k") == b"a"
    assert [i.key for i in await first.list("")] == ["k"]


@pytest.mark.parametrize("key", ["", "/abs", "../up", "a/../../b", "a//b", "a/./b"])
async def test_keys_are_relative_paths(make_store: Callable[..., ObjectStore], key: str) -> None:
    with pytest.raises(ValueError, match="relative object key"):
        await make_store().put_bytes(key, b"x")


class SourceBroke(Exception):
    pass


async def failing_after(size: int) -> AsyncIterator[bytes]:
    async for chunk in chunks(size):
        yield chunk
    raise SourceBroke("the snapshot stream ended early")


async def test_a_source_that_fails_midway_leaves_no_object(make_store: Callable[..., ObjectStore]) -> None:
    store = make_store()
    with pytest.raises(SourceBroke):
        await store.put_stream("etcd/demo/half.db", failing_after(BIG))
    assert await store.list("") == []
    with pytest.raises(StoreNotFound):
        await store.get_bytes("etcd/demo/half.db")


async def stalls_after(size: int) -> AsyncIterator[bytes]:
    async for chunk in chunks(size):
        yield chunk
    await trio.sleep_forever()
    yield b""  # never reached


async def test_a_cancelled_put_leaves_no_object(make_store: Callable[..., ObjectStore]) -> None:
    store = make_store()
    with trio.move_on_after(2) as scope:
        await store.put_stream("etcd/demo/cancelled.db", stalls_after(BIG))
    assert scope.cancelled_caught
    assert await store.list("") == []

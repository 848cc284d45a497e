"""A streamed put and get of 64 MiB holds a few parts in memory, never the object.

Measured as the growth of this process's peak RSS (VmHWM, reset through /proc/self/clear_refs)
over its RSS before; the figures are printed (pytest -s) and asserted only loosely.
"""

from __future__ import annotations

from collections.abc import Callable

from actors.store_port import ObjectStore
from tests.harness.memory import reset_peak, status_kib
from tests.stores.data import MiB, chunks, drain, sha256_of

SIZE = 64 * MiB
# Parts of 8 MiB, two in flight plus the one being filled, and the client's own buffers.
LIMIT = SIZE // 2


async def test_streamed_put_and_get_hold_far_less_than_the_object(
    make_store: Callable[..., ObjectStore], store_kind: str
) -> None:
    store = make_store()
    expected = await sha256_of(SIZE, seed=3)
    growth = {}
    before = reset_peak()
    stored = await store.put_stream("big.db", chunks(SIZE, seed=3))
    growth["put"] = status_kib("VmHWM") - before
    before = reset_peak()
    assert await drain(store.get_stream("big.db")) == (SIZE, expected)
    growth["get"] = status_kib("VmHWM") - before
    assert stored.sha256 == expected
    put, get = growth["put"] // 1024, growth["get"] // 1024
    print(f"{store_kind}: 64 MiB streamed, peak RSS growth put {put} MiB, get {get} MiB")
    assert max(growth.values()) * 1024 < LIMIT, growth

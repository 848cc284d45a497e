"""The manifest watcher, on real files in real (short) time."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from supervisor.local.manifest import Settling, Unreadable, read_settled, watch_manifest

POLL = 0.02


async def next_text(receive: trio.MemoryReceiveChannel[str | Unreadable]) -> str | Unreadable:
    with trio.fail_after(5):
        return await receive.receive()


async def test_sends_the_text_at_start_and_on_every_change(tmp_path: Path) -> None:
    path = tmp_path / "clusters.yaml"
    path.write_text("size: 1\n")
    send, receive = trio.open_memory_channel[str | Unreadable](10)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: watch_manifest(path, send, poll_interval=POLL))
        assert await next_text(receive) == "size: 1\n"

        path.write_text("size: 3\n")  # same length: caught by mtime or hash
        assert await next_text(receive) == "size: 3\n"

        # An editor's save: write a new file, rename it over the old one.
        tmp = tmp_path / ".clusters.yaml.swp"
        tmp.write_text("size: 5\nversion: 3.5.21\n")
        os.replace(tmp, path)
        assert await next_text(receive) == "size: 5\nversion: 3.5.21\n"

        # Touching without changing the content sends nothing.
        os.utime(path)
        with trio.move_on_after(10 * POLL):
            assert await receive.receive() is None, "unchanged content must not be resent"
            raise AssertionError("unchanged content was resent")

        path.unlink()
        assert await next_text(receive) == Unreadable("No such file or directory")
        with trio.move_on_after(10 * POLL):
            await receive.receive()
            raise AssertionError("a missing file is reported once, not on every poll")

        # Another reason is news (the daemon reports why); the same reason again is not.
        path.write_bytes(b"\xff\xfe not utf-8")
        assert await next_text(receive) == Unreadable("not UTF-8 text (byte 0 is b'\\xff')")
        path.write_bytes(b"\xff\xfe still not utf-8")
        with trio.move_on_after(10 * POLL):
            await receive.receive()
            raise AssertionError("the same reason was sent twice")
        assert await read_settled(path, interval=POLL) == Unreadable("not UTF-8 text (byte 0 is b'\\xff')")
        path.write_text("size: 7\n")
        assert await next_text(receive) == "size: 7\n"
        nursery.cancel_scope.cancel()


async def test_a_missing_file_at_start_is_an_error_value_then_its_text(tmp_path: Path) -> None:
    path = tmp_path / "later.yaml"
    send, receive = trio.open_memory_channel[str | Unreadable](10)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: watch_manifest(path, send, poll_interval=POLL))
        assert isinstance(await next_text(receive), Unreadable)
        path.write_text("kind: EtcdCluster\n")
        assert await next_text(receive) == "kind: EtcdCluster\n"
        nursery.cancel_scope.cancel()


def test_a_content_is_passed_on_once_two_reads_in_a_row_agree() -> None:
    settling = Settling()
    assert not settling.offer(b"A") and settling.unsettled  # first sight: read again next poll
    assert settling.offer(b"A") and not settling.unsettled  # the same again: sent
    assert not settling.offer(b"A")  # already sent
    assert not settling.offer(b"cut")  # an editor's save caught midway...
    assert not settling.offer(b"B")  # ...is never sent: the next read differs
    assert settling.offer(b"B")
    assert (
        not settling.offer(b"cut") and not settling.offer(b"B") and not settling.unsettled
    )  # back: nothing new


async def test_a_second_look_is_none_while_the_file_changes_under_it(tmp_path: Path) -> None:
    path = tmp_path / "clusters.yaml"
    path.write_text("size: 1\n")
    assert await read_settled(path, interval=POLL) == "size: 1\n"

    async def truncate_midway() -> None:
        await trio.sleep(POLL / 2)
        await trio.Path(path).write_text("")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(truncate_midway)
        assert await read_settled(path, interval=POLL) is None

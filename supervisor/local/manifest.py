"""Watching the YAML file given to `etcd-supervisor local FILE`.

Polling, not inotify: it is portable, survives editors that replace the file by rename, and a
half-second delay is nothing next to etcd's own membership changes. Parsing is actors.codec's job;
this module only says "here is the file's text now".

A content is sent only once two reads a poll apart found it: a read that lands inside an
editor's save (truncated, or cut mid-line) is never acted on, even when what it caught happens
to be valid (a cluster name cut short, a spec cut before its size).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import trio
from attrs import define, frozen

# Even when mtime and size look unchanged, re-read now and then: two writes within one mtime
# tick and the same length would otherwise go unnoticed.
REHASH_EVERY_POLLS = 10
POLL_INTERVAL = 0.5


@frozen
class Unreadable:
    """The file could not be read as text; why, in words for the user ("No such file or directory")."""

    reason: str


@define
class Settling:
    """Which reads to pass on: a content seen by two reads in a row, if not the one passed on last."""

    _sent: bytes | None = None
    _seen: bytes | None = None

    def offer(self, digest: bytes) -> bool:
        seen, self._seen = self._seen, digest
        if digest == self._sent or digest != seen:
            return False
        self._sent = digest
        return True

    @property
    def unsettled(self) -> bool:
        """The last read found something new: read again at the next poll, changed or not."""
        return self._seen != self._sent


async def watch_manifest(
    path: Path | str,
    send_channel: trio.MemorySendChannel[str | Unreadable],
    *,
    poll_interval: float = POLL_INTERVAL,
) -> None:
    """Send the file's text at start and after every change of its content (each once two reads
    a poll apart agree on it), forever.

    A missing, unreadable or non-UTF-8 file is sent as Unreadable (once, until it or the reason
    changes): the daemon keeps its clusters as they are rather than tearing them down because
    an editor briefly removed the file.
    """
    path = Path(path)
    last_stat: tuple[int, int, int] | None = None
    settling = Settling()  # of sha256 digests: of the text, or of why it could not be read
    polls = 0
    async with send_channel:
        while True:
            try:
                st = os.stat(path)
                stat_key: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
            except OSError:
                stat_key = None
            polls += 1
            changed = stat_key is None or stat_key != last_stat or settling.unsettled
            if changed or polls % REHASH_EVERY_POLLS == 0:
                last_stat = stat_key
                text, digest = await _read(path)
                if settling.offer(digest):
                    await send_channel.send(text)
            await trio.sleep(poll_interval)


async def read_settled(path: Path, *, interval: float = POLL_INTERVAL) -> str | Unreadable | None:
    """The file's text, for a look outside the watch (a confirming second read), held to the
    watch's rule: two reads `interval` apart must agree, else None (it is being written)."""
    first, _ = await _read(path)
    await trio.sleep(interval)
    second, _ = await _read(path)
    return second if second == first else None


async def _read(path: Path) -> tuple[str | Unreadable, bytes]:
    try:
        raw = await trio.Path(path).read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        return _unreadable(str(exc.strerror or exc))
    except UnicodeDecodeError as exc:
        return _unreadable(f"not UTF-8 text (byte {exc.start} is {raw[exc.start : exc.start + 1]!r})")
    return text, hashlib.sha256(raw).digest()


def _unreadable(reason: str) -> tuple[Unreadable, bytes]:
    # Not logged here: a missing file is read at every poll; the daemon logs what it is sent.
    return Unreadable(reason), hashlib.sha256(reason.encode()).digest()

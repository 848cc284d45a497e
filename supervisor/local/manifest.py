"""Watching the YAML file given to `etcd-supervisor local FILE`.

Polling, not inotify: it is portable, survives editors that replace the file by rename, and a
half-second delay is nothing next to etcd's own membership changes. Parsing is actors.codec's job;
this module only says "here is the file's text now".
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import trio

log = logging.getLogger(__name__)

# Even when mtime and size look unchanged, re-read now and then: two writes within one mtime
# tick and the same length would otherwise go unnoticed.
REHASH_EVERY_POLLS = 10


async def watch_manifest(
    path: Path | str,
    send_channel: trio.MemorySendChannel[str | None],
    *,
    poll_interval: float = 0.5,
) -> None:
    """Send the file's text at start and after every change of its content, forever.

    A missing, unreadable or non-UTF-8 file is sent as None (once, until it changes again) with
    the reason logged: the daemon keeps its clusters as they are rather than tearing them down
    because an editor briefly removed the file.
    """
    path = Path(path)
    last_stat: tuple[int, int, int] | None = None
    last_sent: bytes | None = None  # sha256 of the text sent, or b"" after sending None
    polls = 0
    async with send_channel:
        while True:
            try:
                st = os.stat(path)
                stat_key: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
            except OSError:
                stat_key = None
            polls += 1
            if stat_key is None or stat_key != last_stat or polls % REHASH_EVERY_POLLS == 0:
                last_stat = stat_key
                text, digest = await _read(path)
                if digest != last_sent:
                    last_sent = digest
                    await send_channel.send(text)
            await trio.sleep(poll_interval)


async def _read(path: Path) -> tuple[str | None, bytes]:
    try:
        raw = await trio.Path(path).read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc.strerror or exc, extra={"event": "manifest"})
        return None, b""
    except UnicodeDecodeError as exc:
        log.warning("%s is not UTF-8 text: %s", path, exc, extra={"event": "manifest"})
        return None, b""
    return text, hashlib.sha256(raw).digest()

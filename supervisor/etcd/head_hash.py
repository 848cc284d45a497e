"""A scratch etcd that is still starting (a backup's verification, a restore's replay): waiting
until it answers, and its HashKV at its head revision, what a verification compares."""

from __future__ import annotations

import logging

import trio

from actors.backup.records import KvHash
from supervisor.etcd.client import EtcdClient, open_etcd_client
from supervisor.etcd.errors import EtcdError
from supervisor.etcd.tls import TlsFiles

log = logging.getLogger(__name__)

# A scratch etcd answers within seconds of starting; a longer wait is said this often, with why.
SAY_EVERY = 30.0
RETRY_AFTER = 0.1
# How long a started scratch etcd may take to answer: a minute, and a minute more per GiB of its
# snapshot (opening the database and rebuilding its index take about that here).
ANSWER_WITHIN = 60.0
ANSWER_WITHIN_PER_GIB = 60.0


def answer_within(snapshot_bytes: int) -> float:
    """Seconds a scratch etcd started on a snapshot of this size may take to answer."""
    return ANSWER_WITHIN + ANSWER_WITHIN_PER_GIB * snapshot_bytes / (1 << 30)


class StillStarting:
    """The errors of a scratch etcd that does not answer yet: every SAY_EVERY s, the last one
    is logged, so a wait bounded only by its caller's long deadline is not a silent one."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._since = self._said = trio.current_time()

    async def failed(self, exc: EtcdError) -> None:
        now = trio.current_time()
        if now - self._said >= SAY_EVERY:
            self._said = now
            waited = now - self._since
            log.warning("scratch etcd at %s not answering after %.0f s: %s", self._url, waited, exc)
        await trio.sleep(RETRY_AFTER)


async def wait_serving(client: EtcdClient, url: str) -> None:
    """Until a freshly started scratch member answers (the caller bounds the wait)."""
    starting = StillStarting(url)
    while True:
        try:
            await client.current_revision()
            return
        except EtcdError as exc:
            await starting.failed(exc)


async def hash_at_head(url: str, *, tls: TlsFiles | None = None) -> KvHash:
    """HashKV of the member at `url` at its own head revision, once it answers (the caller
    bounds the wait)."""
    async with open_etcd_client([url], tls=tls, call_timeout=30.0) as client:
        starting = StillStarting(url)
        while True:
            try:
                revision = await client.current_revision()
                found = await client.hash_kv(url, revision)
                return KvHash(found.hash, found.revision, found.compact_revision)
            except EtcdError as exc:
                await starting.failed(exc)

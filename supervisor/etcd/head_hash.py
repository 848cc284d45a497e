"""HashKV of a scratch etcd that is still starting: what a backup's verification compares."""

from __future__ import annotations

import trio

from actors.backup.records import KvHash
from supervisor.etcd.client import open_etcd_client
from supervisor.etcd.errors import EtcdError
from supervisor.etcd.tls import TlsFiles


async def hash_at_head(url: str, *, tls: TlsFiles | None = None) -> KvHash:
    """HashKV of the member at `url` at its own head revision, once it answers (the caller
    bounds the wait)."""
    async with open_etcd_client([url], tls=tls, call_timeout=30.0) as client:
        while True:
            try:
                revision = await client.current_revision()
                found = await client.hash_kv(url, revision)
                return KvHash(found.hash, found.revision, found.compact_revision)
            except EtcdError:
                await trio.sleep(0.1)  # still starting

"""The etcd admin client the actors use: trio-flavoured, failover across endpoints, typed errors.

EtcdClient gathers its calls by subject (client_kv.py, client_cluster.py, client_auth.py) over
the machinery that makes each one (client_base.py: endpoints, deadlines, retries, tokens).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio

from .client_auth import AuthCalls
from .client_base import sole_error
from .client_cluster import ClusterCalls
from .client_kv import KeyValueCalls
from .tls import TlsFiles

__all__ = ["EtcdClient", "open_etcd_client", "sole_error"]


class EtcdClient(KeyValueCalls, ClusterCalls, AuthCalls):
    """Every etcd call the supervisor makes, on endpoints it fails over between."""


@asynccontextmanager
async def open_etcd_client(
    endpoints: Sequence[str],
    *,
    tls: TlsFiles | None = None,
    credentials: tuple[str, str] | None = None,
    call_timeout: float = 5.0,
) -> AsyncIterator[EtcdClient]:
    """An EtcdClient for the lifetime of the block (inside ``open_asyncio_loop``)."""
    if not math.isfinite(call_timeout) or call_timeout <= 0:
        raise ValueError("call_timeout must be a positive number of seconds")
    client = EtcdClient(endpoints, tls=tls, credentials=credentials, call_timeout=call_timeout)
    try:
        yield client
    finally:
        with trio.CancelScope(shield=True):
            await client.aclose()

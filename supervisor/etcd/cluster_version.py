"""The cluster version etcd reports: the `etcdcluster` field of a member's HTTP `/version`.

etcd's gRPC API names each server's own version but not the cluster's (the version every
member speaks, which the leader raises once all members run a newer minor, or lowers for a
downgrade). Members serve `/version` over HTTP/1.1 on the client URL, beside gRPC, with the
same TLS; one aiohttp session keeps the connections. Use from trio inside the asyncio bridge.
"""

from __future__ import annotations

import ssl
from typing import Any

import aiohttp
import trio

from supervisor.aio import run_asyncio

from .tls import TlsFiles

# A member that does not answer this fast is left out: the caller falls back to what the
# members' own versions imply.
TIME_LIMIT = 1.0


class ClusterVersionReader:
    """GET <client URL>/version; call aclose()."""

    def __init__(self, tls: TlsFiles | None) -> None:
        self._tls = tls
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | None = None

    async def read(self, client_url: str) -> str:
        """The cluster version ("3.5.0"), or "" when the member does not say (still joining,
        unreachable, or an answer without it)."""
        with trio.move_on_after(TIME_LIMIT):
            try:
                return await run_asyncio(self._get, client_url.rstrip("/") + "/version")
            except (aiohttp.ClientError, OSError, ValueError, TimeoutError):
                pass
        return ""

    async def _get(self, url: str) -> str:
        if self._session is None:  # aiohttp binds a session to the running asyncio loop
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIME_LIMIT))
        options: dict[str, Any] = {}
        if url.startswith("https:"):
            options["ssl"] = self._context()
            if self._tls is not None and self._tls.server_name:
                options["server_hostname"] = self._tls.server_name
        async with self._session.get(url, **options) as response:
            response.raise_for_status()
            body = await response.json(content_type=None)
        found = body.get("etcdcluster") if isinstance(body, dict) else None
        return found if isinstance(found, str) and found != "not_decided" else ""

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = (self._tls or TlsFiles()).ssl_context()
            self._ssl.set_alpn_protocols(["http/1.1"])  # the gRPC context asks for h2 only
        return self._ssl

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await run_asyncio(session.close)

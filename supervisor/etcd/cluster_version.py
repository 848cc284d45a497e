"""The cluster version etcd reports: the `etcdcluster` field of a member's HTTP `/version`.

etcd's gRPC API names each server's own version but not the cluster's (the version every
member speaks, which the leader raises once all members run a newer minor, or lowers for a
downgrade). Members serve `/version` over HTTP/1.1 on the client URL, beside gRPC, with the
same TLS.

The standard library's client in a worker thread: nothing is kept open between reads, and no
asyncio object is left for the garbage collector. A member's answer is reused for REUSE_FOR
seconds: the leader is probed every tick, and the cluster version changes a few times a year.
"""

from __future__ import annotations

import http.client
import json
import urllib.request
from functools import partial

import trio

from .tls import FollowingContext, TlsFiles

# A member that does not answer this fast is left out: the caller falls back to what the
# members' own versions imply.
TIME_LIMIT = 1.0
REUSE_FOR = 2.0


class ClusterVersionReader:
    """GET <client URL>/version."""

    def __init__(self, tls: TlsFiles | None) -> None:
        # The gRPC context asks for h2 only; the certificate follows renewals.
        self._context = FollowingContext(tls or TlsFiles(), alpn="http/1.1")
        context = self._context.current()
        # No proxy from the environment: members are reached directly, as over gRPC.
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        self._last: dict[str, tuple[float, str]] = {}  # client URL -> (read at, answer)

    async def read(self, client_url: str) -> str:
        """The cluster version ("3.5.0"), or "" when the member does not say (still joining,
        unreachable, or an answer without it)."""
        now = trio.current_time()
        read_at, answer = self._last.get(client_url, (-REUSE_FOR, ""))
        if now - read_at < REUSE_FOR:
            return answer
        answer = ""
        url = client_url.rstrip("/") + "/version"
        self._context.current()  # a renewed client certificate, for the connection made below
        with trio.move_on_after(TIME_LIMIT * 2):
            try:
                answer = await trio.to_thread.run_sync(partial(self._get, url), abandon_on_cancel=True)
            except (OSError, ValueError, http.client.HTTPException):
                pass
        self._last = {client_url: (now, answer)}  # the leader's only: it is the one asked
        return answer

    def _get(self, url: str) -> str:
        with self._opener.open(url, timeout=TIME_LIMIT) as response:
            body = json.load(response)
        found = body.get("etcdcluster") if isinstance(body, dict) else None
        return found if isinstance(found, str) and found != "not_decided" else ""

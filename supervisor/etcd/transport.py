"""Connections to etcd endpoints: one grpclib channel per endpoint URL, used only inside asyncio.

Everything here that touches grpclib runs as asyncio code (through ``supervisor.aio``);
grpclib's failures leave this module as our typed errors.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar
from urllib.parse import urlsplit

import attrs
from grpclib.client import Channel
from grpclib.config import Configuration
from grpclib.exceptions import GRPCError, ProtocolError, StreamTerminatedError

from . import frame_repr
from .addresses import KNOWN, UNADDRESSED
from .errors import EtcdConnectionError, EtcdError, EtcdTimeout, EtcdTlsError, error_from_status
from .tls import FollowingContext, TlsFiles

T = TypeVar("T")

Metadata = dict[str, str]

# Large HTTP/2 windows let etcd stream (watches, large ranges) without waiting for our
# WINDOW_UPDATEs; grpclib's 4 MiB default halved a snapshot's throughput on loopback. (The
# snapshot itself has a connection of its own: snapshot_stream.py.)
_WINDOW = 64 * 1024 * 1024

# h2 formats a repr of every received frame, even with logging off: make DATA frames' cheap.
frame_repr.install()


@attrs.frozen
class Endpoint:
    url: str
    host: str
    port: int
    secure: bool

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        if "://" not in url:
            url = f"http://{url}"
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "unix", "unixs") or not parts.hostname:
            raise ValueError(f"not an etcd client URL: {url!r}")
        if parts.scheme.startswith("unix"):
            raise ValueError(f"unix socket endpoints are not supported: {url!r}")
        secure = parts.scheme == "https"
        return cls(url=url.rstrip("/"), host=parts.hostname, port=parts.port or 2379, secure=secure)


class ChannelPool:
    """The grpclib channels, keyed by endpoint URL. Use from asyncio code only."""

    def __init__(self, tls: TlsFiles | None) -> None:
        self._tls = tls
        self._ssl_context: FollowingContext | None = None
        self._channels: dict[str, Channel] = {}
        self._users: dict[Channel, int] = {}  # calls and streams running on each channel
        self._dialed: dict[Channel, str | None] = {}  # the known address each channel dials

    @property
    def presents_client_certificate(self) -> bool:
        return self._tls is not None and self._tls.cert_file is not None

    @property
    def server_name(self) -> str | None:
        """The name to check servers' certificates against, when not the endpoint's host."""
        return self._tls.server_name if self._tls else None

    def ssl_context(self) -> ssl.SSLContext:
        """The one context of every channel, its client certificate re-read when renewed."""
        if self._ssl_context is None:
            self._ssl_context = FollowingContext(self._tls or TlsFiles())
        return self._ssl_context.current()

    def get(self, endpoint: Endpoint) -> Channel:
        channel = self._channels.get(endpoint.url)
        if endpoint.secure:
            # An open channel keeps the context: a reconnect then presents a renewed certificate.
            self.ssl_context()
        # The member's address as the runtime knows it (addresses.py), else its name resolved.
        address = KNOWN.lookup(endpoint.host)
        if address == UNADDRESSED:
            raise EtcdConnectionError("the member's pod has no address yet", endpoint=endpoint.url)
        if channel is not None and self._dialed.get(channel) != address:
            self.drop(endpoint.url, channel)  # the member's pod moved: its old address is gone
            channel = None
        if channel is None:
            config = Configuration(
                http2_connection_window_size=_WINDOW,
                http2_stream_window_size=_WINDOW,
                ssl_target_name_override=self.server_name or (endpoint.host if address else None),
            )
            channel = Channel(
                address or endpoint.host,
                endpoint.port,
                ssl=self.ssl_context() if endpoint.secure else None,
                config=config,
            )
            self._channels[endpoint.url] = channel
            self._dialed[channel] = address
        return channel

    @contextmanager
    def borrowed(self, endpoint: Endpoint) -> Iterator[Channel]:
        """The endpoint's channel for one call or stream, counted while it runs."""
        channel = self.get(endpoint)
        self._users[channel] = self._users.get(channel, 0) + 1
        try:
            yield channel
        finally:
            left = self._users.pop(channel) - 1
            if left:
                self._users[channel] = left
            self.close_if_dropped(endpoint.url, channel)

    def give_up(self, url: str, channel: Channel) -> None:
        """A call on `channel` got no answer in time. A connection whose peer vanished without a
        word (a pod's address gone with its network namespace) stays open for the kernel's
        quarter of an hour of retransmits, and every call on it would wait in vain: drop it,
        so the next call connects (and resolves the name) afresh. Only when nothing else runs
        on it, so a slow defragmentation or a watch beside a timed-out probe is not cut off."""
        if self._users.get(channel, 0) <= 1:
            self.drop(url, channel)

    def drop(self, url: str, channel: Channel | None = None) -> None:
        """Close the endpoint's channel (only if it is still `channel`, when given)."""
        if channel is None or self._channels.get(url) is channel:
            channel = self._channels.pop(url, None)
        if channel is not None:
            self._dialed.pop(channel, None)
            channel.close()

    def close_if_dropped(self, url: str, channel: Channel) -> None:
        """Close `channel` if the pool let go of it while a call used it: a channel closed while
        it connected gets its connection after the close, and left to the garbage collector it
        closes itself from wherever the collector runs (a worker thread), which breaks the
        event loop bridge."""
        if self._channels.get(url) is not channel:
            channel.close()

    def keep_only(self, urls: set[str]) -> None:
        for url in list(self._channels):
            if url not in urls:
                self.drop(url)

    def close(self) -> None:
        for url in list(self._channels):
            self.drop(url)


def translate(error: BaseException, endpoint: Endpoint, pool: ChannelPool) -> EtcdError | None:
    """Our typed error for what grpclib or the socket raised (None: not ours to translate)."""
    url = endpoint.url
    # A TLS 1.3 server that wants a client certificate only says so after the handshake, by
    # dropping the connection: from a client without one, that drop means "certificate required".
    refused_for_no_cert = endpoint.secure and not pool.presents_client_certificate
    match error:
        case EtcdError():
            return error
        case GRPCError(status=status, message=message):
            return error_from_status(status.value, message, endpoint=url)
        case asyncio.TimeoutError() | TimeoutError():
            return EtcdTimeout("deadline exceeded", endpoint=url)
        case ssl.SSLError():
            return EtcdTlsError(f"TLS handshake failed: {error}", endpoint=url)
        case ConnectionResetError() | BrokenPipeError() | StreamTerminatedError() if refused_for_no_cert:
            return EtcdTlsError(
                f"TLS server closed the connection; it may require a client certificate ({error!r})",
                endpoint=url,
            )
        case OSError() | StreamTerminatedError() | ProtocolError() | EOFError():
            return EtcdConnectionError(f"connection failed: {error!r}", endpoint=url)
        case AttributeError() if "_transport" in str(error):
            # grpclib deletes a connection's transport when it is lost; a stream opened on it
            # in that moment fails this way. It is a lost connection like any other.
            return EtcdConnectionError(f"connection lost while opening a stream: {error!r}", endpoint=url)
    return None


async def invoke(
    pool: ChannelPool,
    endpoint: Endpoint,
    call: Callable[[Channel], Awaitable[T]],
) -> T:
    """Run ``call`` on the endpoint's channel (asyncio side), translating its failures."""
    with pool.borrowed(endpoint) as channel:
        try:
            return await call(channel)
        except asyncio.CancelledError:
            # The caller stopped waiting (a probe's own deadline, shorter than the call's).
            pool.give_up(endpoint.url, channel)
            raise
        except Exception as error:
            typed = failure(error, endpoint, pool, channel)
            if typed is None:
                raise
            raise typed from error


def failure(error: Exception, endpoint: Endpoint, pool: ChannelPool, channel: Channel) -> EtcdError | None:
    """Our typed error for a call on `channel` that raised `error` (None: raise `error` as it is)."""
    typed = translate(error, endpoint, pool)
    if typed is None or typed is error:
        return None
    if isinstance(typed, EtcdConnectionError):
        # Start afresh next time: a half-dead HTTP/2 connection would fail again.
        pool.drop(endpoint.url, channel)
    elif isinstance(typed, EtcdTimeout):
        pool.give_up(endpoint.url, channel)
    return typed

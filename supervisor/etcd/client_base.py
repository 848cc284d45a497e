"""How every etcd call is made: failover across endpoints within one deadline, retry rules
(which failures are worth another endpoint), authentication tokens fetched once and renewed
when etcd refuses them, and streams whose failures come out as typed errors.

Call it from trio code running inside ``supervisor.aio.open_asyncio_loop()``. Each call has a
deadline (``call_timeout`` unless the method says otherwise) that covers all its attempts:
on unavailability the next endpoint is tried with what is left of it. Calls that concern one
member (status, defragment, hash, snapshot) are aimed at that member's endpoint only."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import trio
from grpclib.client import Channel

from proto.etcd import etcdserverpb as pb
from supervisor.aio import run_asyncio
from supervisor.runtime import leaf_exceptions

from .errors import (
    AuthNotEnabled,
    EtcdConnectionError,
    EtcdError,
    EtcdTimeout,
    EtcdUnavailable,
    InvalidAuthToken,
    LeaderChanged,
    NoLeader,
    NotAuthenticated,
    NotSupportedForLearner,
    ProposalDropped,
    RequestTimedOut,
    ServerStopped,
)
from .tls import TlsFiles
from .transport import ChannelPool, Endpoint, Metadata, failure, invoke

T = TypeVar("T")


# A read (it changes nothing, so repeating it is safe) goes round the endpoints this many times,
# pausing ROUND_PAUSE, then twice that, in between: a leader change refuses it everywhere at once.
READ_ROUNDS = 3
ROUND_PAUSE = 0.05


def retry_anywhere(error: EtcdError) -> bool:
    """For reads and idempotent writes: any unavailability is worth another endpoint."""
    return isinstance(error, EtcdUnavailable)


def retry_if_unapplied(error: EtcdError) -> bool:
    """For changes that must not apply twice: only failures that prove etcd did not take it."""
    # RequestTimedOut and LeaderChanged leave the outcome unknown: the caller decides.
    if isinstance(error, RequestTimedOut | LeaderChanged | EtcdTimeout):
        return False
    return isinstance(
        error, EtcdConnectionError | NoLeader | NotSupportedForLearner | ProposalDropped | ServerStopped
    )


class EtcdConnection:
    """Endpoints, failover, deadlines and authentication: what every call of EtcdClient runs
    through (_call). The calls themselves are in client_kv.py, client_cluster.py and
    client_auth.py."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        tls: TlsFiles | None = None,
        credentials: tuple[str, str] | None = None,
        call_timeout: float = 5.0,
    ) -> None:
        self._endpoints: list[Endpoint] = []
        self._pool = ChannelPool(tls)
        self._credentials = credentials
        self._token: str | None = None
        self._token_generation = 0
        self._auth_lock = trio.Lock()
        self.call_timeout = call_timeout
        self.set_endpoints(endpoints)

    # ---- endpoints

    @property
    def endpoints(self) -> tuple[str, ...]:
        return tuple(e.url for e in self._endpoints)

    def set_endpoints(self, endpoints: Sequence[str], *, in_this_order: bool = False) -> None:
        """Replace the endpoints the client fails over between (members come and go). The one
        that worked last stays first if it survives the change, unless `in_this_order`: for a
        call that must go to the first one named (the leader) when it answers."""
        parsed = [Endpoint.parse(url) for url in endpoints]
        if not parsed:
            raise ValueError("at least one endpoint is needed")
        current = self._endpoints[0].url if self._endpoints and not in_this_order else None
        parsed.sort(key=lambda e: e.url != current)
        self._endpoints = parsed

    def _demote(self, url: str) -> None:
        """Move a failing endpoint to the back so later calls start with one that works."""
        for i, endpoint in enumerate(self._endpoints):
            if endpoint.url == url:
                self._endpoints.append(self._endpoints.pop(i))
                return

    # ---- for streams (supervisor/etcd/watch.py)

    async def stream_token(self) -> str | None:
        """The auth token a long-lived stream sends, when the client authenticates."""
        if self._credentials is None:
            return None
        return await self._ensure_token(trio.current_time() + self.call_timeout)

    def stream_of(
        self, endpoint: Endpoint, make: Callable[[Channel], AsyncIterator[T]]
    ) -> Callable[[], AsyncIterator[T]]:
        """An asyncio iterator over `make(channel)` on the endpoint, failures as typed errors."""
        return lambda: translated(self._pool, endpoint, make)

    async def aclose(self) -> None:
        async def close() -> None:
            self._pool.close()

        await run_asyncio(close)

    # ---- the call machinery

    async def _call(
        self,
        call: Callable[[Channel, Metadata, float], Awaitable[T]],
        *,
        endpoint: str | None = None,
        time_limit: float | None = None,
        retry: Callable[[EtcdError], bool] = retry_anywhere,
        authenticated: bool = True,
        rounds: int = 1,
    ) -> T:
        """Run ``call(channel, metadata, seconds_left)`` on one endpoint after another until one answers.

        ``time_limit`` (default ``call_timeout``) bounds all attempts together. ``rounds`` > 1
        goes round the endpoints again after a short pause, for calls that are safe to repeat:
        while leadership moves, every member can refuse a linearizable read for a moment.
        """
        budget = self.call_timeout if time_limit is None else time_limit
        deadline = trio.current_time() + budget
        targets = [Endpoint.parse(endpoint)] if endpoint else list(self._endpoints)
        last_error: EtcdError | None = None
        for round_ in range(rounds):
            if round_:
                pause = ROUND_PAUSE * 2 ** (round_ - 1)
                await trio.sleep(min(pause, max(0.0, deadline - trio.current_time())))
            for attempt, target in enumerate(targets):
                remaining = deadline - trio.current_time()
                if remaining <= 0:
                    break
                # A black-holed endpoint must not eat the whole deadline: leave the others a share.
                share = remaining / (len(targets) - attempt)
                try:
                    return await self._attempt(target, call, share, authenticated)
                except EtcdError as error:
                    if not retry(error) or endpoint:
                        raise
                    last_error = error
                    self._demote(target.url)
        if last_error is not None:
            raise last_error
        raise EtcdTimeout(f"no endpoint answered within {budget:.1f}s")

    async def _attempt(
        self,
        endpoint: Endpoint,
        call: Callable[[Channel, Metadata, float], Awaitable[T]],
        seconds: float,
        authenticated: bool,
    ) -> T:
        deadline = trio.current_time() + seconds
        for first_try in (True, False):
            metadata: Metadata = {}
            generation = self._token_generation
            if authenticated and self._credentials is not None:
                token = await self._ensure_token(deadline)
                if token:
                    metadata["token"] = token
            remaining = max(deadline - trio.current_time(), 0.001)

            async def bound(channel: Channel, md: Metadata = metadata, seconds: float = remaining) -> T:
                return await call(channel, md, seconds)

            # The grpclib deadline travels to etcd; the trio one also bounds connecting.
            with trio.move_on_after(remaining + 0.5) as scope:
                try:
                    return await run_asyncio(invoke, self._pool, endpoint, bound)
                except (InvalidAuthToken, NotAuthenticated):
                    if not (first_try and authenticated and self._credentials is not None):
                        raise
                    await self._reauthenticate(generation)
                    continue
            if scope.cancelled_caught:
                raise EtcdTimeout(f"no answer within {seconds:.1f}s", endpoint=endpoint.url)
        raise AssertionError("unreachable")

    async def _ensure_token(self, deadline: float) -> str | None:
        if self._token is None and self._token_generation == 0:
            await self._reauthenticate(0, deadline)
        return self._token

    async def _reauthenticate(self, seen_generation: int, deadline: float | None = None) -> None:
        """Fetch a fresh token, once for all the callers that found the old one invalid."""
        assert self._credentials is not None
        name, password = self._credentials
        async with self._auth_lock:
            if self._token_generation != seen_generation:
                return  # another task already did it
            time_limit = None if deadline is None else max(deadline - trio.current_time(), 0.001)
            try:
                response = await self._call(
                    lambda ch, md, t: pb.AuthStub(ch).authenticate(
                        pb.AuthenticateRequest(name=name, password=password), timeout=t
                    ),
                    time_limit=time_limit,
                    authenticated=False,
                )
                self._token = response.token
            except AuthNotEnabled:
                self._token = None  # nothing to authenticate against (yet)
            self._token_generation += 1


async def translated(
    pool: ChannelPool, endpoint: Endpoint, make: Callable[[Channel], AsyncIterator[T]]
) -> AsyncIterator[T]:
    """An asyncio async iterator whose grpclib failures come out as typed errors."""
    with pool.borrowed(endpoint) as channel:
        iterator = make(channel)
        while True:
            try:
                item = await iterator.__anext__()
            except StopAsyncIteration:
                return
            except Exception as error:
                typed = failure(error, endpoint, pool, channel)
                if typed is None:
                    raise
                raise typed from error
            yield item


def sole_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The one real error inside a nursery's exception group (cancellations are its echoes)."""
    leaves = [e for e in leaf_exceptions(group) if not isinstance(e, trio.Cancelled)]
    typed = [e for e in leaves if isinstance(e, EtcdError)]
    if typed:
        return typed[0]
    if len(leaves) == 1:
        return leaves[0]
    return group

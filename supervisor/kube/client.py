"""A small, dict-in dict-out Kubernetes client for trio code.

kubernetes-asyncio's typed models would be a second vocabulary next to our manifests (plain
dicts, camelCase as the API has them), so this uses only its ApiClient: configuration
loading, authentication (tokens, client certificates, in-cluster refresh) and the aiohttp
session. Every request runs inside the asyncio loop through supervisor.aio; callers see
trio async functions and one exception family, KubeError.
"""

from __future__ import annotations

import collections
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import trio
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from supervisor.aio import run_asyncio

log = logging.getLogger(__name__)

Obj = dict[str, Any]

IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# A request that takes longer than this is treated as a lost connection; watches use
# their own, longer, read timeout.
REQUEST_TIMEOUT = 30.0

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class KubeError(Exception):
    """An API answer that is not a success, or no answer at all (status 0)."""

    def __init__(self, status: int, reason: str, message: str = "", body: Obj | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}


class KubeUnavailable(KubeError):
    """The API server could not be reached or dropped the connection."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "Unavailable", message)


def is_not_found(exc: BaseException) -> bool:
    return isinstance(exc, KubeError) and exc.status == 404


def is_conflict(exc: BaseException) -> bool:
    return isinstance(exc, KubeError) and exc.status == 409


def is_namespace_terminating(exc: BaseException) -> bool:
    """403 because the namespace is being deleted: nothing new can be made in it, ever again."""
    if not isinstance(exc, KubeError) or exc.status != 403:
        return False
    causes = (exc.body.get("details") or {}).get("causes") or []
    return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)


def is_gone(exc: BaseException) -> bool:
    """410: the resourceVersion asked for has been compacted away; list again."""
    return isinstance(exc, KubeError) and exc.status == 410


def _error_from(status: int, raw: bytes) -> KubeError:
    try:
        body = json.loads(raw)
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    return KubeError(status, str(body.get("reason", "")), str(body.get("message", raw[:200])), body)


def _query(params: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    out = []
    for key, value in (params or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append((key, str(value)))
    return out


class KubeClient:
    """Raw REST verbs on API paths (e.g. ``/api/v1/namespaces/ns/pods``), from trio.

    Build with open_kube_client(); the object is only valid inside that block.
    """

    def __init__(self, api: k8s_client.ApiClient) -> None:
        self._api = api
        self.requests = 0  # for the operator's metrics: requests (not watches) sent
        # Failed requests by HTTP status (0: no answer); expected ones (404 on get_or_none, 409)
        # included: the operator's metrics show them by code.
        self.errors: collections.Counter[int] = collections.Counter()

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    # --- asyncio side ------------------------------------------------------------------------

    async def _aio_request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        request_timeout: float,
    ) -> Obj:
        try:
            resp = await self._api.call_api(
                path,
                method,
                query_params=_query(query),
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=request_timeout,
            )
            try:
                raw = await resp.read()
            finally:
                resp.release()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise KubeUnavailable(f"{method} {path}: {exc!r}") from exc
        if not 200 <= resp.status < 300:
            raise _error_from(resp.status, raw)
        return json.loads(raw) if raw else {}

    async def _aio_stream(
        self, path: str, query: Mapping[str, Any], read_timeout: float, handle: WatchStream
    ) -> AsyncIterator[Obj]:
        """Yield each line of a streaming (watch) response as a decoded object."""
        try:
            resp = await self._api.call_api(
                path,
                "GET",
                query_params=_query(query),
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                # No total: a watch is long; a silent connection (no event, no bookmark)
                # longer than read_timeout is a dead one.
                _request_timeout=aiohttp.ClientTimeout(connect=REQUEST_TIMEOUT, sock_read=read_timeout),
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise KubeUnavailable(f"watch {path}: {exc!r}") from exc
        handle._response = resp
        try:
            if handle.closed:
                return
            if not 200 <= resp.status < 300:
                raise _error_from(resp.status, await resp.read())
            while True:
                try:
                    line = await resp.content.readline()
                except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                    raise KubeUnavailable(f"watch {path}: {exc!r}") from exc
                if not line:
                    return  # the server ended the watch (timeoutSeconds): the caller re-watches
                if line.strip():
                    yield json.loads(line)
        finally:
            resp.release()

    # --- trio side ---------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> Obj:
        self.requests += 1
        try:
            return await run_asyncio(
                self._aio_request, method, path, query, body, content_type, request_timeout
            )
        except KubeError as exc:
            self.errors[exc.status] += 1
            raise

    async def get(self, path: str, *, query: Mapping[str, Any] | None = None) -> Obj:
        return await self.request("GET", path, query=query)

    async def create(self, path: str, body: Mapping[str, Any]) -> Obj:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, body: Mapping[str, Any]) -> Obj:
        return await self.request("PUT", path, body=body)

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> Obj:
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def json_patch(self, path: str, ops: list[Obj]) -> Obj:
        return await self.request("PATCH", path, body=ops, content_type=JSON_PATCH)

    async def delete(
        self, path: str, *, grace_period_seconds: int | None = None, propagation: str | None = None
    ) -> Obj:
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation is not None:
            options["propagationPolicy"] = propagation
        return await self.request("DELETE", path, body=options)

    async def delete_if_exists(self, path: str, **kwargs: Any) -> bool:
        """Delete; True if something was there. Idempotent callers want exactly this."""
        try:
            await self.delete(path, **kwargs)
        except KubeError as exc:
            if is_not_found(exc):
                return False
            raise
        return True

    async def get_or_none(self, path: str) -> Obj | None:
        try:
            return await self.get(path)
        except KubeError as exc:
            if is_not_found(exc):
                return None
            raise

    async def list_all(self, path: str, *, query: Mapping[str, Any] | None = None, page: int = 500) -> Obj:
        """A whole list, following `continue` tokens; items merged, resourceVersion of the first page.

        Every page of a paginated list is served from the same snapshot, so the first page's
        resourceVersion is the one to watch from.
        """
        params = dict(query or {})
        params["limit"] = page
        first = await self.get(path, query=params)
        items = list(first.get("items") or [])
        token = (first.get("metadata") or {}).get("continue")
        while token:
            more = await self.get(path, query={**params, "continue": token})
            items.extend(more.get("items") or [])
            token = (more.get("metadata") or {}).get("continue")
        first["items"] = items
        return first

    def stream(self, path: str, query: Mapping[str, Any], *, read_timeout: float) -> WatchStream:
        """A watch stream; iterate it in asyncio (pump_asyncio_iterator), close() it from trio."""
        handle = WatchStream()
        handle._iterator = self._aio_stream(path, query, read_timeout, handle)
        return handle


class WatchStream:
    """An asyncio async iterator over watch events that trio code can close.

    Cancelling the asyncio task that reads a watch does not always end it: seen here, a
    cancellation that lands between two reads is absorbed and the task reads on until the
    server ends the watch, minutes later. Closing the connection ends any read at once.
    """

    def __init__(self) -> None:
        self._iterator: AsyncIterator[Obj] | None = None
        self._response: Any = None
        self.closed = False

    def __aiter__(self) -> AsyncIterator[Obj]:
        assert self._iterator is not None
        return self._iterator

    def close(self) -> None:
        self.closed = True
        if self._response is not None:
            self._response.close()


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(IN_CLUSTER_TOKEN)


async def _aio_load_configuration(kubeconfig: str | None, context: str | None) -> k8s_client.Configuration:
    configuration = k8s_client.Configuration()
    if kubeconfig:
        await k8s_config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration, persist_config=False
        )
        source = kubeconfig
    elif _in_cluster():
        # Refreshes the projected ServiceAccount token from disk as it rotates.
        k8s_config.load_incluster_config(client_configuration=configuration)
        source = "in-cluster service account"
    else:
        await k8s_config.load_kube_config(
            context=context, client_configuration=configuration, persist_config=False
        )
        source = "~/.kube/config"
    log.info("kubernetes API %s (credentials from %s)", configuration.host, source)
    return configuration


@asynccontextmanager
async def open_kube_client(
    kubeconfig: str | None = None, *, context: str | None = None
) -> AsyncIterator[KubeClient]:
    """Open a client: an explicit kubeconfig path wins, else in-cluster config, else ~/.kube/config.

    Must run inside supervisor.aio.open_asyncio_loop().
    """
    configuration = await run_asyncio(_aio_load_configuration, kubeconfig, context)

    async def make_api() -> k8s_client.ApiClient:
        # aiohttp binds its session to the running asyncio loop: create it there.
        return k8s_client.ApiClient(configuration=configuration)

    api = await run_asyncio(make_api)
    try:
        yield KubeClient(api)
    finally:
        # Shielded: on a cancelled shutdown the session must still close, or aiohttp
        # reports an unclosed session and leaks its connections.
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            await run_asyncio(api.close)

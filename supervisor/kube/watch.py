"""List-then-watch of one kind of object, surviving everything the API server can do to a watch.

The shape of client-go's reflector, small: list (paginated) and remember the list's
resourceVersion; watch from there with bookmarks on; when the stream ends, watch again from the
last version seen; when that version has been compacted away (410 Gone), list again; when the
server is unreachable, back off and retry; and every `resync_every` seconds list again anyway,
so a missed event can never stay missed.

Consumers get level-triggered events: after a re-list the store is diffed, objects that vanished
meanwhile come out as DELETED, and everything else is re-delivered. SYNCED follows every full
list, so a consumer (and /readyz) knows when it has seen the whole picture.

Each watch connection is one asyncio coroutine (supervisor.aio.pump_asyncio_iterator) pushing
into a trio channel; nothing else here touches asyncio.
"""

from __future__ import annotations

import enum
import logging
import random
from collections.abc import Mapping
from typing import Any, NoReturn

import attrs
import trio
from attrs import frozen

from actors.model import API_GROUP, API_VERSION, ClusterRef
from supervisor.aio import pump_asyncio_iterator
from supervisor.kube.client import KubeClient, KubeError, KubeUnavailable, is_gone
from supervisor.runtime import Backoff, leaf_exceptions

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    SYNCED = "SYNCED"  # a full list has been delivered; `object` is empty


@frozen
class WatchEvent:
    type: EventType
    object: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str((self.object.get("metadata") or {}).get("name", ""))

    @property
    def namespace(self) -> str:
        return str((self.object.get("metadata") or {}).get("namespace", ""))


@frozen
class Resource:
    """A kind of object: its API prefix and plural (the path segment)."""

    prefix: str  # "/api/v1" or "/apis/<group>/<version>"
    plural: str

    def path(self, namespace: str | None) -> str:
        if namespace is None:
            return f"{self.prefix}/{self.plural}"
        return f"{self.prefix}/namespaces/{namespace}/{self.plural}"


PODS = Resource("/api/v1", "pods")
VOLUME_CLAIMS = Resource("/api/v1", "persistentvolumeclaims")
ETCD_CLUSTERS = Resource(f"/apis/{API_GROUP}/{API_VERSION}", "etcdclusters")


@frozen
class WatchOptions:
    resync_every: float = 300.0
    # The server ends each watch after a random time in this range, as client-go asks, so
    # many watchers never reconnect in step.
    min_watch_seconds: int = 300
    max_watch_seconds: int = 600
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    # A stream silent this long past its own timeout is dead (a half-open connection).
    read_grace: float = 60.0
    page_size: int = 500


@frozen
class WatchStatistics:
    lists: int  # full lists, the first included
    watches: int  # watch connections opened
    expired: int  # 410 Gone answers that forced a re-list
    errors: int  # failed lists or watches, each followed by a backoff
    synced: bool  # at least one full list delivered
    resource_version: str | None


def _backoff(opts: WatchOptions) -> Backoff:
    # Jitter spreads the reconnects of many watchers that failed together.
    return Backoff(initial=opts.backoff_initial, maximum=opts.backoff_max, jitter=0.5)


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _resource_version(obj: Mapping[str, Any]) -> str | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv else None


class _WatchEnded(Exception):
    pass


def _single_kube_error(group: BaseExceptionGroup[BaseException]) -> KubeError | None:
    leaves = leaf_exceptions(group)
    if len(leaves) == 1 and isinstance(leaves[0], KubeError):
        return leaves[0]
    return None


class Watcher:
    """Watches one resource in one namespace (or all), optionally filtered by labels."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        options: WatchOptions | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self._resource = resource
        self._namespace = namespace
        self._selector = label_selector
        self._options = options or WatchOptions()
        self._rng = rng or random.Random()
        self._store: dict[tuple[str, str], Mapping[str, Any]] = {}
        self._rv: str | None = None
        self._lists = self._watches = self._expired = self._errors = 0
        self._synced = trio.Event()

    def __repr__(self) -> str:
        where = self._namespace or "all namespaces"
        return f"<Watcher {self._resource.plural} in {where} ({self._selector or 'all'})>"

    @property
    def resource_name(self) -> str:
        return self._resource.plural

    def statistics(self) -> WatchStatistics:
        return WatchStatistics(
            lists=self._lists,
            watches=self._watches,
            expired=self._expired,
            errors=self._errors,
            synced=self._synced.is_set(),
            resource_version=self._rv,
        )

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def snapshot(self) -> list[Mapping[str, Any]]:
        """The objects as last seen (the watch's local cache)."""
        return list(self._store.values())

    async def run(
        self, send: trio.MemorySendChannel[WatchEvent], *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> NoReturn:
        """Deliver events into `send` forever; task_status.started() after the first full list."""
        opts = self._options
        path = self._resource.path(self._namespace)
        delays = _backoff(opts).delays(self._rng)
        started = False
        # A watcher run again (after a cancelled run) resumes from its resourceVersion.
        next_resync = trio.current_time() + opts.resync_every
        while True:
            try:
                if self._rv is None:
                    await self._list(path, send)
                    next_resync = trio.current_time() + opts.resync_every
                    if not started:
                        task_status.started()
                        started = True
                with trio.move_on_at(next_resync) as resync:
                    await self._watch(path, send)
                if resync.cancel_called:
                    log.debug("%r: periodic resync", self)
                    self._rv = None
                else:
                    # The server closed the stream on schedule: a clean reconnect, no delay.
                    delays = _backoff(opts).delays(self._rng)
            except KubeError as exc:
                if is_gone(exc):
                    # Our resourceVersion was compacted away: only a fresh list can continue.
                    log.info("%r: resourceVersion %s expired, listing again", self, self._rv)
                    self._expired += 1
                    self._rv = None
                    continue
                self._errors += 1
                delay = next(delays)
                log.warning("%r: %s; retrying in %.1fs", self, exc, delay)
                await trio.sleep(delay)

    async def _list(self, path: str, send: trio.MemorySendChannel[WatchEvent]) -> None:
        query = {"labelSelector": self._selector} if self._selector else None
        listing = await self._client.list_all(path, query=query, page=self._options.page_size)
        self._lists += 1
        items = listing.get("items") or []
        kind = str(listing.get("kind", "")).removesuffix("List")
        api_version = listing.get("apiVersion")
        fresh: dict[tuple[str, str], Mapping[str, Any]] = {}
        for item in items:
            # List items come without kind/apiVersion; consumers should not care where an
            # object came from, so restore them.
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
            fresh[_key(item)] = item
        old = self._store
        self._store = fresh
        self._rv = str((listing.get("metadata") or {}).get("resourceVersion") or "") or None
        for key, obj in fresh.items():
            await send.send(WatchEvent(EventType.MODIFIED if key in old else EventType.ADDED, obj))
        for key, obj in old.items():
            if key not in fresh:
                await send.send(WatchEvent(EventType.DELETED, obj))
        await send.send(WatchEvent(EventType.SYNCED, {}))
        self._synced.set()

    async def _watch(self, path: str, send: trio.MemorySendChannel[WatchEvent]) -> None:
        opts = self._options
        timeout = self._rng.randint(opts.min_watch_seconds, opts.max_watch_seconds)
        query: dict[str, Any] = {
            "watch": True,
            "resourceVersion": self._rv,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout,
        }
        if self._selector:
            query["labelSelector"] = self._selector
        raw_send, raw_recv = trio.open_memory_channel[dict[str, Any]](0)
        self._watches += 1
        failure: KubeError | None = None
        stream = self._client.stream(path, query, read_timeout=timeout + opts.read_grace)

        async def close_on_exit() -> None:
            try:
                await trio.sleep_forever()
            finally:
                stream.close()  # ends the asyncio read at once; see WatchStream

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(close_on_exit)
                nursery.start_soon(pump_asyncio_iterator, lambda: aiter(stream), raw_send)
                async with raw_recv:
                    async for raw in raw_recv:
                        failure = await self._apply(raw, send)
                        if failure is not None:
                            break
                # The stream ended (or failed): stop close_on_exit, and the pump if still there.
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            single = _single_kube_error(group)
            if single is None:
                raise
            # A read failing because we closed the stream on our way out is no error.
            if not (stream.closed and isinstance(single, KubeUnavailable)):
                raise single from None
        if failure is not None:
            raise failure

    async def _apply(
        self, raw: Mapping[str, Any], send: trio.MemorySendChannel[WatchEvent]
    ) -> KubeError | None:
        kind = raw.get("type")
        obj = raw.get("object") or {}
        if kind == "ERROR":
            # A Status object: 410 when the resourceVersion is too old, others rarely.
            return KubeError(
                int(obj.get("code") or 500), str(obj.get("reason", "")), str(obj.get("message", "")), obj
            )
        rv = _resource_version(obj)
        if rv:
            self._rv = rv
        if kind == "BOOKMARK":
            return None
        try:
            event_type = EventType(str(kind))
        except ValueError:
            log.warning("%r: unknown watch event type %r", self, kind)
            return None
        key = _key(obj)
        if event_type is EventType.DELETED:
            self._store.pop(key, None)
        else:
            self._store[key] = obj
        await send.send(WatchEvent(event_type, obj))
        return None


# --- routing ---------------------------------------------------------------------------------


@frozen
class ClusterEvent:
    """What changed about one EtcdCluster, for the actor that owns it.

    `object` is None when the resource is gone; `deleting` when it carries a deletionTimestamp
    (the finalizer holds it until the runtime's delete_cluster has run).
    """

    ref: ClusterRef
    type: EventType
    object: Mapping[str, Any] | None = attrs.field(eq=False)

    @property
    def deleting(self) -> bool:
        return bool(self.object and (self.object.get("metadata") or {}).get("deletionTimestamp"))


def cluster_event(event: WatchEvent) -> ClusterEvent | None:
    """A watch event on etcdclusters -> a ClusterEvent (None for SYNCED markers)."""
    if event.type is EventType.SYNCED:
        return None
    ref = ClusterRef(namespace=event.namespace, name=event.name)
    return ClusterEvent(ref, event.type, None if event.type is EventType.DELETED else event.object)


def watchers_for(
    client: KubeClient,
    resource: Resource,
    namespaces: list[str] | None,
    *,
    label_selector: str | None = None,
    options: WatchOptions | None = None,
) -> list[Watcher]:
    """One watcher for all namespaces (namespaces=None), or one per listed namespace."""
    targets: list[str | None] = [None] if namespaces is None else list(namespaces)
    return [
        Watcher(client, resource, namespace=ns, label_selector=label_selector, options=options)
        for ns in targets
    ]


async def run_watchers(
    watchers: list[Watcher],
    send: trio.MemorySendChannel[WatchEvent],
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run several watchers into one channel; started() once every one has listed."""
    async with send, trio.open_nursery() as nursery:
        for watcher in watchers:
            await nursery.start(watcher.run, send.clone())
        task_status.started()

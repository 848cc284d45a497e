"""Watcher against a real kube-apiserver: list-then-watch, resync, restarts, 410 Gone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import trio

from supervisor.kube.client import KubeClient, KubeUnavailable
from supervisor.kube.watch import ETCD_CLUSTERS, EventType, Watcher, WatchEvent, WatchOptions
from tests.harness.kube import REPO, KubeAPIServer
from tests.kube.clients import clients

pytestmark = pytest.mark.slow

FAST = WatchOptions(backoff_initial=0.1, backoff_max=1.0, min_watch_seconds=60, max_watch_seconds=90)


def clusters_path(ns: str) -> str:
    return f"/apis/etcd.io/v1alpha1/namespaces/{ns}/etcdclusters"


async def create(admin: KubeClient, ns: str, name: str) -> None:
    body = {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name},
        "spec": {"size": 1},
    }
    # The admin client's pooled connection may be one the restarted server dropped.
    for _ in range(50):
        try:
            await admin.create(clusters_path(ns), body)
            return
        except KubeUnavailable:
            await trio.sleep(0.2)
    raise AssertionError("API server did not come back")


async def next_event(recv: trio.MemoryReceiveChannel[WatchEvent], *, timeout: float = 30) -> WatchEvent:
    with trio.fail_after(timeout):
        return await recv.receive()


async def wait_for(
    recv: trio.MemoryReceiveChannel[WatchEvent], type_: EventType, name: str = "", *, timeout: float = 60
) -> list[WatchEvent]:
    """Events up to and including the wanted one."""
    seen = []
    with trio.fail_after(timeout):
        async for event in recv:
            seen.append(event)
            if event.type is type_ and (not name or event.name == name):
                return seen
    raise AssertionError("channel closed")


async def test_lists_then_watches_and_resyncs(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ns = kube_namespace
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create(admin, ns, "one")
        watcher = Watcher(op, ETCD_CLUSTERS, namespace=ns, options=FAST)
        send, recv = trio.open_memory_channel[WatchEvent](100)
        async with trio.open_nursery() as nursery:
            await nursery.start(watcher.run, send)
            first = await next_event(recv)
            assert (first.type, first.name) == (EventType.ADDED, "one")
            assert first.object["kind"] == "EtcdCluster"
            assert (await next_event(recv)).type is EventType.SYNCED
            assert watcher.statistics().synced

            await create(admin, ns, "two")
            event = await next_event(recv)
            assert (event.type, event.name) == (EventType.ADDED, "two")
            await admin.merge_patch(f"{clusters_path(ns)}/two", {"metadata": {"labels": {"x": "y"}}})
            event = await next_event(recv)
            assert (event.type, event.name) == (EventType.MODIFIED, "two")
            assert event.object["metadata"]["labels"] == {"x": "y"}
            await admin.delete(f"{clusters_path(ns)}/one")
            event = await next_event(recv)
            assert (event.type, event.name) == (EventType.DELETED, "one")
            assert {o["metadata"]["name"] for o in watcher.snapshot()} == {"two"}
            nursery.cancel_scope.cancel()


async def test_periodic_resync_redelivers_everything(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ns = kube_namespace
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create(admin, ns, "one")
        # namespace=None: all namespaces, which the deployed ClusterRole must allow.
        watcher = Watcher(op, ETCD_CLUSTERS, options=WatchOptions(resync_every=1.0, backoff_initial=0.1))
        send, recv = trio.open_memory_channel[WatchEvent](1000)
        async with trio.open_nursery() as nursery:
            await nursery.start(watcher.run, send)
            await wait_for(recv, EventType.SYNCED)
            seen = await wait_for(recv, EventType.SYNCED, timeout=20)
            assert any(e.type is EventType.MODIFIED and e.name == "one" for e in seen)
            assert watcher.statistics().lists >= 2
            assert watcher.statistics().errors == 0
            nursery.cancel_scope.cancel()


async def test_watch_survives_an_api_server_restart(private_kube_apiserver: KubeAPIServer) -> None:
    server = private_kube_apiserver
    operator = await trio.to_thread.run_sync(server.operator_kubeconfig)
    ns = await trio.to_thread.run_sync(server.create_namespace, "restart")
    async with clients(server, operator) as (op, admin):
        watcher = Watcher(op, ETCD_CLUSTERS, namespace=ns, options=FAST)
        send, recv = trio.open_memory_channel[WatchEvent](100)
        async with trio.open_nursery() as nursery:
            await nursery.start(watcher.run, send)
            await create(admin, ns, "before")
            await wait_for(recv, EventType.ADDED, "before")

            await trio.to_thread.run_sync(server.restart)
            await create(admin, ns, "after")
            await wait_for(recv, EventType.ADDED, "after")
            stats = watcher.statistics()
            assert stats.watches >= 2  # it really reconnected
            nursery.cancel_scope.cancel()


def compact(server: KubeAPIServer) -> None:
    etcdctl = str(REPO / ".venv" / "bin" / "etcdctl")
    status = subprocess.run(
        [etcdctl, f"--endpoints={server.etcd_url}", "endpoint", "status", "-w", "json"],
        check=True,
        capture_output=True,
        text=True,
    )
    revision = json.loads(status.stdout)[0]["Status"]["header"]["revision"]
    subprocess.run([etcdctl, f"--endpoints={server.etcd_url}", "compact", str(revision)], check=True)


async def test_an_expired_resource_version_relists_and_reports_what_was_missed(
    private_kube_apiserver: KubeAPIServer,
) -> None:
    server = private_kube_apiserver
    operator = await trio.to_thread.run_sync(server.operator_kubeconfig)
    ns = await trio.to_thread.run_sync(server.create_namespace, "gone")
    async with clients(server, operator) as (op, admin):
        await create(admin, ns, "kept")
        await create(admin, ns, "dropped")
        watcher = Watcher(op, ETCD_CLUSTERS, namespace=ns, options=FAST)
        send, recv = trio.open_memory_channel[WatchEvent](100)
        async with trio.open_nursery() as nursery:
            await nursery.start(watcher.run, send)
            await wait_for(recv, EventType.SYNCED)
            nursery.cancel_scope.cancel()
        assert watcher.statistics().lists == 1

        # While nobody watches: changes, a compaction past the watcher's resourceVersion, and
        # an API server restart (an upgrade, say).
        await admin.delete(f"{clusters_path(ns)}/dropped")
        await create(admin, ns, "added")
        for i in range(5):
            await create(admin, ns, f"filler-{i}")
            await admin.delete(f"{clusters_path(ns)}/filler-{i}")
        await trio.to_thread.run_sync(compact, server)
        # A fresh server: its watch cache starts after the compaction, so neither the cache nor
        # etcd can replay from the watcher's version (a running server's cache still could).
        await trio.to_thread.run_sync(server.restart)

        # Resuming from the stale version: 410 Gone, a fresh list, and a diff against the cache.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watcher.run, send)
            seen = await wait_for(recv, EventType.SYNCED)
            kinds = {(e.type, e.name) for e in seen}
            assert (EventType.DELETED, "dropped") in kinds
            assert (EventType.ADDED, "added") in kinds
            assert (EventType.MODIFIED, "kept") in kinds
            assert watcher.statistics().expired == 1
            assert watcher.statistics().lists == 2
            await create(admin, ns, "later")
            await wait_for(recv, EventType.ADDED, "later")
            nursery.cancel_scope.cancel()

"""/healthz and /readyz: the bare server (hypercorn), then run_operator's wiring on a real kube-apiserver."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio
from prometheus_client import CollectorRegistry

from supervisor.aio import open_asyncio_loop
from supervisor.kube.client import open_kube_client
from supervisor.kube.leader import LeaderElectionConfig
from supervisor.kube.operator import OperatorPorts, run_operator
from supervisor.kube.watch import ClusterEvent, EventType
from supervisor.metrics.http import Endpoints, Readiness, serve_endpoints
from tests.harness.kube import OPERATOR_NAMESPACE, KubeAPIServer
from tests.harness.poll import eventually


async def http_get(port: int, path: str) -> tuple[int, str]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(f"GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n".encode())
        data = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(4096):
                data += chunk
    head, _, body = data.decode().partition("\r\n\r\n")
    return int(head.split()[1]), body


async def metrics_of(port: int) -> dict[str, float]:
    """The samples of /metrics, keyed by name{labels} as the text format writes them."""
    status, body = await http_get(port, "/metrics")
    assert status == 200
    samples = (line.rsplit(" ", 1) for line in body.splitlines() if line and not line.startswith("#"))
    return {key: float(value) for key, value in samples}


async def test_healthz_always_readyz_per_checks() -> None:
    readiness = Readiness()
    readiness.require("watches-synced")
    async with trio.open_nursery() as nursery:
        port = await nursery.start(serve_endpoints, 0, Endpoints(readiness, CollectorRegistry()))
        assert await http_get(port, "/healthz") == (200, "ok\n")
        assert await http_get(port, "/readyz") == (503, "not ready: watches-synced\n")
        readiness.set("watches-synced", True)
        assert await http_get(port, "/readyz") == (200, "ok\n")
        assert (await http_get(port, "/nothing"))[0] == 404
        nursery.cancel_scope.cancel()


@pytest.mark.slow
async def test_operator_leader_and_standby_are_ready_and_only_the_leader_acts(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    lease = f"op-{uuid.uuid4().hex[:8]}"
    seen: dict[str, list[ClusterEvent]] = {"a": [], "b": []}

    def serve_clusters_for(who: str):  # type: ignore[no-untyped-def]
        async def serve(ports: OperatorPorts, events: trio.MemoryReceiveChannel[ClusterEvent]) -> None:
            async for event in events:
                seen[who].append(event)

        return serve

    def election(identity: str) -> LeaderElectionConfig:
        return LeaderElectionConfig(
            namespace=OPERATOR_NAMESPACE,
            identity=identity,
            name=lease,
            lease_duration=3,
            renew_deadline=2,
            retry_period=0.4,
        )

    async with open_asyncio_loop(), trio.open_nursery() as nursery:
        port_a = await nursery.start(
            lambda task_status: run_operator(
                serve_clusters=serve_clusters_for("a"),
                kubeconfig=str(operator_kubeconfig),
                namespaces=[kube_namespace],
                health_port=0,
                election=election("a"),
                task_status=task_status,
            )
        )
        # A passive replica is ready too: wait until a holds the lease, then until it is ready.
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{OPERATOR_NAMESPACE}/leases/{lease}"
        async with open_kube_client(str(kube_apiserver.kubeconfig)) as admin:
            await eventually(
                lambda: admin.get_or_none(lease_path),
                lambda lease: (lease or {}).get("spec", {}).get("holderIdentity") == "a",
                within=30,
                what="a holding the lease",
            )
        await eventually(
            lambda: http_get(port_a, "/readyz"), lambda answer: answer[0] == 200, within=30, what="a ready"
        )
        port_b = await nursery.start(
            lambda task_status: run_operator(
                serve_clusters=serve_clusters_for("b"),
                kubeconfig=str(operator_kubeconfig),
                namespaces=[kube_namespace],
                health_port=0,
                election=election("b"),
                task_status=task_status,
            )
        )
        # The standby is ready too: it is a healthy replica waiting for the lease.
        assert await http_get(port_b, "/readyz") == (200, "ok\n")
        assert (await http_get(port_b, "/healthz"))[0] == 200

        async with open_kube_client(str(kube_apiserver.kubeconfig)) as admin:
            await admin.create(
                f"/apis/etcd.io/v1alpha1/namespaces/{kube_namespace}/etcdclusters",
                {
                    "apiVersion": "etcd.io/v1alpha1",
                    "kind": "EtcdCluster",
                    "metadata": {"name": "op"},
                    "spec": {},
                },
            )
        await eventually(lambda: seen["a"], within=20, every=0.05, what="a's first event")
        event = seen["a"][0]
        assert (event.ref.namespace, event.ref.name, event.type) == (kube_namespace, "op", EventType.ADDED)
        assert not event.deleting
        await trio.sleep(1.0)
        assert seen["b"] == []
        # /metrics of both: who leads, and the leader's watches (listed once each, none failed).
        leader, standby = await metrics_of(port_a), await metrics_of(port_b)
        assert (leader["etcd_supervisor_is_leader"], standby["etcd_supervisor_is_leader"]) == (1.0, 0.0)
        assert leader["etcd_supervisor_leader_acquisitions_total"] == 1.0
        for resource in ("etcdclusters", "pods", "persistentvolumeclaims"):
            assert leader[f'etcd_supervisor_watch_lists_total{{resource="{resource}"}}'] >= 1.0
            assert leader[f'etcd_supervisor_watch_synced{{resource="{resource}"}}'] == 1.0
            assert leader[f'etcd_supervisor_watch_errors_total{{resource="{resource}"}}'] == 0.0
        assert not any(name.startswith("etcd_supervisor_watch") for name in standby)
        assert leader["etcd_supervisor_kube_requests_total"] > 0  # the Lease, the lists
        assert standby["etcd_supervisor_kube_requests_total"] > 0  # the Lease, read and read again
        nursery.cancel_scope.cancel()

"""Leader election on a real Lease, as the deployed ServiceAccount (Role in its own namespace)."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import pytest
import trio

from supervisor.kube.leader import LeaderElectionConfig, LeaderElector
from tests.harness.kube import OPERATOR_NAMESPACE, KubeAPIServer
from tests.harness.poll import eventually
from tests.kube.clients import clients

pytestmark = pytest.mark.slow


def config(lease: str, identity: str) -> LeaderElectionConfig:
    return LeaderElectionConfig(
        namespace=OPERATOR_NAMESPACE,
        identity=identity,
        name=lease,
        lease_duration=3.0,
        renew_deadline=2.0,
        retry_period=0.4,
    )


def lease_path(lease: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{OPERATOR_NAMESPACE}/leases/{lease}"


class LeadingBody:
    """The work done while leading: runs until cancelled, noting when it started and stopped."""

    def __init__(self) -> None:
        self.started: list[float] = []
        self.cancelled: list[float] = []

    async def __call__(self) -> None:
        self.started.append(trio.current_time())
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled.append(trio.current_time())
            raise


async def test_a_second_replica_stays_passive_until_the_first_releases(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path
) -> None:
    lease = f"t-{uuid.uuid4().hex[:8]}"
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        a, b = LeaderElector(op, config(lease, "a")), LeaderElector(op, config(lease, "b"))
        leading: list[str] = []
        release_a = trio.Event()

        async def body_a() -> None:
            leading.append("a")
            await release_a.wait()

        async def body_b() -> None:
            leading.append("b")
            await trio.sleep_forever()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.run, body_a)
            await eventually(lambda: leading == ["a"], within=20, every=0.05)
            nursery.start_soon(b.run, body_b)
            # Longer than a lease duration: only renewals keep b out.
            await trio.sleep(5.0)
            assert leading == ["a"] and a.is_leader and not b.is_leader
            assert (await admin.get(lease_path(lease)))["spec"]["holderIdentity"] == "a"

            release_a.set()  # a's body returns: a releases the lease, b takes over at once
            await eventually(lambda: leading == ["a", "b"], within=2.0, every=0.05, what="b leading after a")
            assert not a.is_leader and b.is_leader
            spec = (await admin.get(lease_path(lease)))["spec"]
            assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
            nursery.cancel_scope.cancel()
        # Cancelled while leading: b released on the way out.
        assert "holderIdentity" not in (await admin.get(lease_path(lease)))["spec"]


async def test_losing_the_lease_to_another_holder_cancels_the_body_at_once(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path
) -> None:
    lease = f"t-{uuid.uuid4().hex[:8]}"
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        a = LeaderElector(op, config(lease, "a"))
        body = LeadingBody()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.run, body)
            await eventually(lambda: body.started, within=20, every=0.05)

            # Another holder takes the lease over (as a replica with a skewed view might).
            obj = await admin.get(lease_path(lease))
            now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            obj["spec"].update(holderIdentity="intruder", renewTime=now, acquireTime=now)
            await admin.replace(lease_path(lease), obj)
            taken = trio.current_time()
            await eventually(lambda: body.cancelled, within=5, every=0.05)
            # Within one renewal period (plus the machine's noise), not a lease duration.
            assert body.cancelled[0] - taken < 0.4 + 1.0
            assert not a.is_leader and a.statistics().losses == 1

            # The intruder never renews: after a lease duration, a leads again.
            await eventually(lambda: len(body.started) == 2, within=15, every=0.05)
            assert a.statistics().acquisitions == 2
            nursery.cancel_scope.cancel()


async def test_renewals_failing_past_the_deadline_cancel_the_body(
    private_kube_apiserver: KubeAPIServer,
) -> None:
    server = private_kube_apiserver
    operator = await trio.to_thread.run_sync(server.operator_kubeconfig)
    async with clients(server, operator) as (op, _admin):
        a = LeaderElector(op, config("etcd-supervisor", "a"))
        body = LeadingBody()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.run, body)
            await eventually(lambda: body.started, within=20, every=0.05)
            await trio.to_thread.run_sync(server.stop)
            stopped = trio.current_time()
            await eventually(lambda: body.cancelled, within=10, every=0.05)
            # No renewal can succeed: lost once the renew deadline (2s) has passed, no later.
            assert body.cancelled[0] - stopped <= 2.0 + 1.0
            assert not a.is_leader
            nursery.cancel_scope.cancel()

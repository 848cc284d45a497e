"""The actor runtime's metrics: restarts, escalations, messages, mailbox depth, drain time."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from prometheus_client import CollectorRegistry

from supervisor.metrics import open_runtime_metrics
from supervisor.runtime import Actor, ChildSpec, Intensity, Supervisor, SupervisorEscalation, actor_child


class Slow(Actor[int]):
    async def handle(self, msg: int) -> None:
        await trio.sleep(1)

    async def on_drained(self) -> None:
        await trio.sleep(0.5)


async def crash(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    task_status.started()
    await trio.sleep(1)
    raise RuntimeError("boom")


async def test_restarts_escalations_messages_depth_and_drains(autojump_clock: trio.testing.MockClock) -> None:
    registry = CollectorRegistry()
    get = registry.get_sample_value
    async with open_runtime_metrics(registry):
        spec, handle = actor_child("worker-7", Slow, kind="worker")
        async with trio.open_nursery() as nursery:
            await nursery.start(Supervisor("workers of x", [spec], kind="workers").run)
            for i in range(3):
                handle.send_nowait(i)
            await trio.sleep(0.5)  # one handled, two waiting
            assert get("etcd_supervisor_actor_mailbox_depth", {"actor": "worker"}) == 2
            assert get("etcd_supervisor_actors_running", {"actor": "worker"}) == 1
            await trio.sleep(10)
            assert get("etcd_supervisor_actor_messages_handled_total", {"actor": "worker"}) == 3
            assert get("etcd_supervisor_actor_drain_duration_seconds_sum", {"actor": "worker"}) == 0.5
            nursery.cancel_scope.cancel()
        assert get("etcd_supervisor_actors_running", {"actor": "worker"}) is None

        doomed = Supervisor("flaky x", [ChildSpec("c", crash)], intensity=Intensity(2, 60.0), kind="flaky")
        with pytest.raises(SupervisorEscalation):
            await doomed.run()
        assert get("etcd_supervisor_supervisor_restarts_total", {"supervisor": "flaky"}) == 2
        assert get("etcd_supervisor_supervisor_escalations_total", {"supervisor": "flaky"}) == 1

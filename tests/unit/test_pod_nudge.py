"""Which new pods are nudged (supervisor/kube/pod_nudge.py): pure decisions on pod objects."""

from typing import Any

from supervisor.kube.pod_nudge import NUDGES, NudgeSchedule, nudge_patch, set_aside, settled


def pod(
    *, uid: str = "u1", node: str | None = "node-a", ip: str | None = None, deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "demo-0", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-24T03:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node} if node else {},
        "status": {"podIP": ip} if ip else {},
    }


def test_a_pod_on_its_node_without_an_address_is_set_aside():
    assert set_aside(pod())
    assert not set_aside(pod(node=None))  # not scheduled: the scheduler retries by itself
    assert not set_aside(pod(ip="10.0.0.9"))
    assert not set_aside(pod(deleting=True))


def test_nudging_ends_once_the_pod_has_its_address_or_is_no_longer_the_same_pod():
    assert not settled(pod(), "u1")
    assert not settled(pod(node=None), "u1")
    assert settled(pod(ip="10.0.0.9"), "u1")
    assert settled(pod(deleting=True), "u1")
    assert settled(pod(uid="u2"), "u1")  # replaced by a pod of the same name
    assert settled(None, "u1")


def test_each_nudge_writes_a_new_value():
    assert nudge_patch(1) != nudge_patch(2)


def test_a_polled_pod_is_due_a_nudge_every_interval_while_set_aside_and_a_few_times_at_most():
    schedule = NudgeSchedule(made_at=100.0, every=2.0)
    assert not schedule.due(pod(), 101.9)  # not yet: the kubelet may still be on it
    assert schedule.due(pod(), 102.0)
    assert not schedule.due(pod(node=None), 102.0)  # unscheduled: not the kubelet's to retry
    assert not schedule.due(pod(ip="10.0.0.9"), 102.0)
    schedule.count = 1
    assert not schedule.due(pod(), 103.0)  # one interval after the last, not after every poll
    assert schedule.due(pod(), 104.0)
    schedule.count = NUDGES
    assert not schedule.due(pod(), 1000.0)

"""Why a member died, as the runtimes read it: etcd's log locally, the pod's termination message."""

import datetime as dt
import json

from supervisor.kube.pods import (
    NEVER_STARTED_SECONDS,
    STOP_OVERDUE_SECONDS,
    never_started,
    pod_last_error,
    stop_overdue,
    stranded,
    unschedulable,
)
from supervisor.local.etcd_log import last_error_line


def test_the_last_error_level_line_of_etcds_json_log(tmp_path):
    log = tmp_path / "etcd.log"
    lines = [
        {"level": "info", "msg": "starting"},
        {"level": "error", "msg": "older trouble"},
        {"level": "fatal", "msg": "failed to open database", "error": "invalid database"},
        {"level": "info", "msg": "closing"},
    ]
    log.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert last_error_line(log) == "etcd: failed to open database: invalid database"


def test_plain_text_start_up_errors_and_quiet_logs(tmp_path):
    log = tmp_path / "etcd.log"
    log.write_text("invalid value for flag --peer-urls\n")
    assert last_error_line(log) == "etcd: invalid value for flag --peer-urls"
    log.write_text(json.dumps({"level": "info", "msg": "all good"}) + "\n")
    assert last_error_line(log) == ""
    assert last_error_line(tmp_path / "missing.log") == ""


def test_a_pods_termination_message_tail_or_reason():
    def pod(terminated):
        return {"status": {"containerStatuses": [{"name": "etcd", "state": {"terminated": terminated}}]}}

    tail = pod({"message": "line one\nfatal: no space\n\n", "exitCode": 1})
    assert pod_last_error(tail) == "fatal: no space"
    assert pod_last_error(pod({"reason": "OOMKilled", "exitCode": 137})) == "OOMKilled"
    assert pod_last_error(None) == ""


def test_the_schedulers_reason_for_a_pod_it_cannot_place():
    message = "0/3 nodes are available: 3 node(s) had volume node affinity conflict."
    pending = {
        "spec": {},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
            ],
        },
    }
    assert unschedulable(pending) == message
    assert unschedulable({"spec": {"nodeName": "n1"}, "status": pending["status"]}) == ""  # placed since
    scheduled = {"spec": {}, "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}
    assert unschedulable(scheduled) == "" and unschedulable(None) == ""


def test_a_pod_stop_is_overdue_only_well_past_its_grace_period():
    deadline = dt.datetime(2026, 11, 27, 7, 0, tzinfo=dt.UTC)
    pod = {"metadata": {"deletionTimestamp": "2026-11-27T07:00:00Z"}}
    assert not stop_overdue(pod, deadline + dt.timedelta(seconds=STOP_OVERDUE_SECONDS - 1))
    assert stop_overdue(pod, deadline + dt.timedelta(seconds=STOP_OVERDUE_SECONDS + 1))
    assert not stop_overdue({"metadata": {}}, deadline + dt.timedelta(days=1))
    assert not stop_overdue(None, deadline)


def test_a_pod_never_started_on_its_node_only_long_after_it_was_placed():
    placed = dt.datetime(2026, 11, 27, 7, 0, tzinfo=dt.UTC)
    pod = {
        "spec": {"nodeName": "e2en-b"},
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-27T07:00:00Z"}
            ]
        },
    }
    later = placed + dt.timedelta(seconds=NEVER_STARTED_SECONDS + 1)
    assert never_started(pod, later) and stranded(pod, later)
    assert not never_started(pod, placed + dt.timedelta(seconds=NEVER_STARTED_SECONDS - 1))
    with_address = {**pod, "status": {**pod["status"], "podIP": "10.246.2.7"}}
    assert not never_started(with_address, later)
    assert not never_started({"spec": {}, "status": {}}, later)  # not placed: unschedulable's case

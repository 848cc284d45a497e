"""A real Prometheus scraping a running `etcd-supervisor local` daemon and its etcd members on
loopback, with the shipped alert rules (their `for:` shortened to seconds): the series exist, a
frozen then killed leader shows up in the leader-change counters and the heal histogram, and
freezing two of three members fires EtcdQuorumLost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.harness.poll import until
from tests.harness.procs import kill_all_mentioning
from tests.harness.prometheus import Prometheus, fast_rules, require_prometheus, running_prometheus
from tests.monitoring.dashboard import ROWS, queries_by_row

CLI = Path(sys.executable).parent / "etcd-supervisor"
CLUSTER = """\
apiVersion: etcd.io/v1alpha1
kind: EtcdCluster
metadata: {name: demo, namespace: default}
spec:
  size: 3
"""
DEMO = '{namespace="default",cluster="demo"}'


def status(state: Path) -> dict[str, Any] | None:
    try:
        return json.loads((state / "default" / "demo" / "status.json").read_text())
    except (OSError, ValueError):
        return None


def running(state: Path) -> dict[str, Any]:
    def ok(s: dict[str, Any] | None) -> bool:
        return (
            s is not None and s["phase"] == "Running" and s["readyReplicas"] == 3 and len(s["members"]) == 3
        )

    found = until(lambda: status(state), ok, within=90, every=0.3, what="demo Running with 3 ready members")
    assert found is not None
    return found


def http(port: int, path: str, data: bytes | None = None) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, method="PUT" if data else "GET"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.read().decode()


def check_logs(path: Path) -> None:
    """Every line written in the cluster's actor tree names the cluster; one audit line per operation."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    in_tree = ("actors.", "supervisor.runtime", "supervisor.etcd")
    from_actors = [
        e for e in lines if e["logger"].startswith(in_tree) and e.get("supervisor") != "etcd-supervisor"
    ]
    assert from_actors and all(e.get("cluster") == "default/demo" for e in from_actors), [
        e for e in from_actors if e.get("cluster") != "default/demo"
    ][:3]
    audit = [e for e in lines if e.get("event") == "audit"]
    assert sum(e["message"].endswith("added learner demo-1 and started it") for e in audit) == 1
    assert {"default/demo"} == {e["cluster"] for e in audit}
    changes = [i for i, e in enumerate(lines) if e.get("event") == "log-level"]
    assert [lines[i]["message"].split(" (")[0] for i in changes] == [
        "log level info -> debug",
        "log level debug -> warning",
    ]
    # From the file's change on, nothing below warning (the shutdown's info lines included).
    assert all(e["level"] in ("warning", "error", "critical") for e in lines[changes[1] :])


def metric(prom: Prometheus, expr: str, at_least: float, *, within: float = 60) -> float:
    value = until(
        lambda: prom.value(expr),
        lambda v: v is not None and v >= at_least,
        within=within,
        every=0.5,
        what=expr,
    )
    assert value is not None
    return value


@pytest.mark.slow
def test_prometheus_sees_series_move_and_fires_quorum_lost(tmp_path: Path) -> None:
    require_prometheus()
    manifest, state = tmp_path / "clusters.yaml", tmp_path / "state"
    manifest.write_text(CLUSTER)
    level_file = tmp_path / "LOG_LEVEL"
    level_file.write_text("info\n")
    daemon_log = (tmp_path / "daemon.log").open("w")
    daemon = subprocess.Popen(
        [
            str(CLI),
            "--log-level-file",
            str(level_file),
            "local",
            str(manifest),
            "--state-dir",
            str(state),
            "--no-board",
            "--metrics-port",
            "0",
        ],
        stdout=daemon_log,
        stderr=subprocess.STDOUT,
    )
    frozen: list[int] = []
    try:
        port_file = state / "metrics-port"
        port = int(
            until(
                lambda: port_file.exists() and port_file.read_text().strip(), within=30, what="metrics port"
            )
        )
        first = running(state)
        scrape = [
            {"job_name": "etcd-supervisor", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]},
            {
                "job_name": "etcd",
                "file_sd_configs": [
                    {"files": [str(state / "prometheus-targets.json")], "refresh_interval": "1s"}
                ],
            },
        ]
        with running_prometheus(tmp_path / "prometheus", scrape, fast_rules(tmp_path / "rules.yaml")) as prom:
            # Both jobs are scraped, and the daemon's and etcd's series are there.
            until(lambda: prom.targets_up("etcd"), lambda n: n == 3, within=60, what="3 etcd targets up")
            metric(prom, f"etcd_supervisor_cluster_ready_members{DEMO}", 3)
            assert prom.value(f"etcd_supervisor_cluster_healthy_voting_members{DEMO}") == 3
            assert prom.value(f"etcd_supervisor_cluster_quorum{DEMO}") == 2
            assert prom.value(f"count(etcd_supervisor_member_version_info{DEMO})") == 3
            assert prom.value('sum(etcd_server_has_leader{job="etcd",cluster="demo"})') == 3
            assert prom.value('etcd_supervisor_operations_total{cluster="demo",operation="AddLearner"}') == 2
            assert prom.value('sum(etcd_supervisor_actor_messages_handled_total{actor="cluster"})') > 0
            # Exported at 0 before any backup, so the first failure is an increase() for the alert.
            verifications = 'etcd_supervisor_backup_verifications_total{cluster="demo",result="failed"}'
            assert prom.value(verifications) == 0
            assert prom.value(f"etcd_supervisor_member_heal_duration_seconds_count{DEMO}") in (None, 0.0)
            seen_before = prom.value('max(etcd_server_leader_changes_seen_total{job="etcd",cluster="demo"})')
            assert seen_before is not None

            # The leader freezes (a new one is elected meanwhile), then is killed: the daemon
            # restarts it. Prometheus sees the leader change and the heal.
            leader = next(m for m in first["members"] if m["role"] == "leader")
            os.kill(leader["pid"], signal.SIGSTOP)
            metric(prom, f"etcd_supervisor_leader_changes_total{DEMO}", 1)
            metric(
                prom, 'max(etcd_server_leader_changes_seen_total{job="etcd",cluster="demo"})', seen_before + 1
            )
            os.kill(leader["pid"], signal.SIGKILL)
            metric(prom, f"etcd_supervisor_member_heal_duration_seconds_count{DEMO}", 1, within=90)
            assert prom.value(f"etcd_supervisor_member_heal_duration_seconds_sum{DEMO}") > 0

            # The dashboard's rows that local mode feeds all get data (backups are not configured
            # here, the operator row is Kubernetes-only, and no defragmentation ran).
            rows = queries_by_row(cluster="demo")
            for row in ROWS[:4]:
                for expr in (e for e in rows[row] if "defrag_reclaimed" not in e and "DefragMember" not in e):
                    until(lambda e=expr: prom.query(e), within=30, every=0.5, what=f"{row}: {expr}")

            # The log level changes at run time: over HTTP, then from the followed file.
            assert http(port, "/loglevel") == "info\n"
            assert http(port, "/loglevel", data=b"debug") == "debug\n"
            assert http(port, "/loglevel") == "debug\n"
            level_file.write_text("warning\n")
            until(
                lambda: http(port, "/loglevel"),
                lambda v: v == "warning\n",
                within=30,
                what="level from the file",
            )

            # Two of three members frozen: quorum is lost, and the alert fires.
            again = running(state)
            frozen = [m["pid"] for m in again["members"] if m["role"] != "leader"]
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
            alerts = until(
                lambda: [a for a in prom.firing() if a["labels"]["alertname"] == "EtcdQuorumLost"],
                within=60,
                every=0.5,
                what="EtcdQuorumLost firing",
            )
            assert alerts[0]["labels"]["cluster"] == "demo" and alerts[0]["labels"]["severity"] == "critical"
            # Thawed, quorum is back: the time without it is in the recovery histogram.
            for pid in frozen:
                os.kill(pid, signal.SIGCONT)
            frozen = []
            metric(prom, f"etcd_supervisor_quorum_recovery_duration_seconds_count{DEMO}", 1)
        daemon.terminate()
        daemon.wait(30)
        check_logs(tmp_path / "daemon.log")
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        daemon.terminate()
        try:
            daemon.wait(30)
        finally:
            daemon_log.close()
            kill_all_mentioning(str(tmp_path))

"""`etcd-supervisor local FILE` as a user runs it: a real daemon process, real etcd members."""

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.harness.poll import until
from tests.harness.procs import etcd_pids_under

CLI = Path(sys.executable).parent / "etcd-supervisor"

DOC = """\
apiVersion: etcd.io/v1alpha1
kind: EtcdCluster
metadata: {{name: {name}, namespace: default}}
spec:
  size: {size}
  security: {{tls: {{enabled: {tls}}}}}
"""


def status_of(state: Path, name: str) -> dict | None:
    try:
        return json.loads((state / "default" / name / "status.json").read_text())
    except (OSError, ValueError):
        return None


def wait_status(state: Path, name: str, predicate, timeout: float = 60.0) -> dict:
    return until(
        lambda: status_of(state, name),
        lambda status: status is not None and predicate(status),
        within=timeout,
        every=0.3,
        what=f"the status of {name}",
    )


def healthy(size: int):
    return lambda s: s["phase"] == "Running" and s["readyReplicas"] == size and len(s["members"]) == size


def start(file: Path, state: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(CLI), "--log-format", "json", "local", str(file), "--state-dir", str(state), "--no-board"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def etcdctl(status: dict, *args: str) -> str:
    endpoints = ",".join(m["clientURL"] for m in status["members"])
    etcdctl_bin = Path(sys.executable).parent / "etcdctl"
    done = subprocess.run(
        [str(etcdctl_bin), f"--endpoints={endpoints}", *args], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, f"etcdctl {' '.join(args)}: {done.stderr.strip()}"
    return done.stdout


def test_the_local_command_follows_its_file_and_resumes_after_a_graceful_stop(tmp_path):
    file, state = tmp_path / "clusters.yaml", tmp_path / "state"
    file.write_text(
        DOC.format(name="alpha", size=1, tls="false") + "---\n" + DOC.format(name="beta", size=1, tls="true")
    )
    daemon = start(file, state)
    try:
        alpha = wait_status(state, "alpha", healthy(1))
        wait_status(state, "beta", healthy(1))  # a TLS cluster, certificates made by the runtime
        assert all("pid" in m for m in alpha["members"])
        etcdctl(alpha, "put", "greeting", "hello")

        # A new size scales; an invalid document is reported and the other cluster keeps running.
        file.write_text(
            DOC.format(name="alpha", size=3, tls="false")
            + "---\n"
            + DOC.format(name="beta", size=0, tls="true")
        )
        alpha = wait_status(state, "alpha", healthy(3))
        beta = wait_status(
            state, "beta", lambda s: any(c["reason"] == "InvalidSpec" for c in s["conditions"])
        )
        assert "spec.size" in beta["message"] and beta["phase"] == "Running"

        # A removed document tears that cluster down; its status goes away, its data stays.
        file.write_text(DOC.format(name="alpha", size=3, tls="false"))
        until(
            lambda: status_of(state, "beta"),
            lambda s: s is None,
            within=30,
            every=0.3,
            what="beta's status gone",
        )
        assert status_of(state, "beta") is None
        assert any((state / "default" / "beta" / "members").glob("*/data/member/wal"))
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err[-2000:]
    assert etcd_pids_under(state) == []
    audit = [
        json.loads(line)["reason"]
        for line in (state / "default" / "alpha" / "events.jsonl").read_text().splitlines()
    ]
    assert audit.count("LearnerPromoted") == 2

    # Running it again resumes the same members from their data. The status the first daemon
    # left on disk stands until the new one has heard from every member, so the new daemon's own
    # status is the one whose members are its new processes.
    stopped_pids = {m.get("pid") for m in status_of(state, "alpha")["members"]} - {None}
    daemon = start(file, state)
    try:
        again = wait_status(
            state,
            "alpha",
            lambda s: healthy(3)(s) and not stopped_pids & {m.get("pid") for m in s["members"]},
            timeout=60,
        )
        assert {m["id"] for m in again["members"]} == {m["id"] for m in alpha["members"]}
        assert etcdctl(again, "get", "greeting", "--print-value-only").strip() == "hello"
    finally:
        daemon.send_signal(signal.SIGINT)
        daemon.communicate(timeout=60)
    assert daemon.returncode == 0
    assert etcd_pids_under(state) == []

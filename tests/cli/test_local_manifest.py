"""A manifest file that breaks never tears a cluster down: a real daemon process following its
file, real etcd members, the file broken in the ways editors and accidents break it."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.cli.test_local_command import CLI, DOC, healthy, status_of, wait_status
from tests.harness.poll import until
from tests.harness.procs import etcd_pids_under

ALPHA = DOC.format(name="alpha", size=1, tls="false")
BETA = DOC.format(name="beta", size=1, tls="false")
GOOD = ALPHA + "---\n" + BETA


class Daemon:
    """`etcd-supervisor local` with its board (printed as snapshots: stdout is no terminal) and
    its log in files, so nothing blocks on a full pipe."""

    def __init__(self, workdir: Path, file: Path) -> None:
        self.state = workdir / "state"
        self.board, self.log = workdir / "board.txt", workdir / "daemon.log"
        with self.board.open("w") as out, self.log.open("w") as err:
            self.process = subprocess.Popen(
                [str(CLI), "local", str(file), "--state-dir", str(self.state)], stdout=out, stderr=err
            )

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        assert self.process.returncode == 0, self.log.read_text()[-2000:]
        assert etcd_pids_under(self.state) == []

    def wait_board(self, text: str) -> None:
        """The board draws at most four times a second: what a status file says shows soon after."""
        until(self.board.read_text, lambda board: text in board, within=5, what=f"{text!r} on the board")

    def logged(self, event: str) -> list[str]:
        lines = [json.loads(line) for line in self.log.read_text().splitlines() if line.startswith("{")]
        return [line["message"] for line in lines if line.get("event") == event]


def pids(status: dict) -> list[int]:
    return [m["pid"] for m in status["members"]]


def problem(status: dict) -> str | None:
    found = [c["message"] for c in status["conditions"] if c["reason"] == "InvalidSpec"]
    return found[0] if found else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


BROKEN = {
    "invalid YAML": (
        b"apiVersion: etcd.io/v1alpha1\nkind: EtcdCluster\n  metadata: {name: alpha\n",
        "line 3",
    ),
    "binary garbage": (bytes(range(256)) * 4, "not UTF-8 text"),
    "text garbage": (b"\x00\x01\x02 not even yaml", "line 1, column 1: character #x0000 is not allowed"),
    "an empty file": (b"", "no EtcdCluster document"),
}


def test_a_broken_file_changes_nothing_and_says_why(workdir):
    file = workdir / "clusters.yaml"
    file.write_text(GOOD)
    daemon = Daemon(workdir, file)
    try:
        before = {name: pids(wait_status(daemon.state, name, healthy(1))) for name in ("alpha", "beta")}
        for what, (content, why) in BROKEN.items():
            file.write_bytes(content)
            for name in ("alpha", "beta"):
                status = wait_status(daemon.state, name, lambda s: problem(s) is not None, timeout=10)
                assert problem(status).startswith(f"cannot use {file}: "), what
                assert why in problem(status), (what, problem(status))
                assert "still serving the previous one" in status["message"]
            time.sleep(3)  # longer than a removal's confirmation: nothing is removed meanwhile either
            for name in ("alpha", "beta"):
                status = status_of(daemon.state, name)
                assert status["phase"] == "Running" and pids(status) == before[name], what
                assert all(alive(pid) for pid in before[name]), what
            file.write_text(GOOD)  # mended: the problem goes, the members are the same
            for name in ("alpha", "beta"):
                assert (
                    pids(wait_status(daemon.state, name, lambda s: problem(s) is None, timeout=10))
                    == before[name]
                )

        # Half-written: the second document is cut inside its metadata. The first applies; the
        # second names no cluster, so beta (maybe that very document) is held and told why.
        file.write_text(ALPHA + "---\napiVersion: etcd.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n")
        beta = wait_status(daemon.state, "beta", lambda s: problem(s) is not None, timeout=10)
        assert "document 1: metadata.name: must be a DNS label" in problem(beta)
        time.sleep(3)
        assert pids(status_of(daemon.state, "beta")) == before["beta"]
        assert problem(status_of(daemon.state, "alpha")) is None
        file.write_text(GOOD)
        wait_status(daemon.state, "beta", lambda s: problem(s) is None, timeout=10)
    finally:
        daemon.stop()
    assert any(
        "line 3, column 11: mapping values are not allowed here" in m for m in daemon.logged("manifest")
    )
    board = daemon.board.read_text()
    assert f"! cannot use {file}: no EtcdCluster document in it" in board
    assert "etcdctl: eval" in board and "local env default/alpha --state-dir" in board


def test_a_cluster_goes_only_when_a_second_read_still_lacks_it(workdir):
    file = workdir / "clusters.yaml"
    file.write_text(GOOD)
    daemon = Daemon(workdir, file)
    try:
        beta = pids(wait_status(daemon.state, "beta", healthy(1)))
        wait_status(daemon.state, "alpha", healthy(1))

        # beta out of the file for long enough to be read (a read must hold for one poll to
        # count), and back before the confirming read 2 s later: nothing happens to it.
        file.write_text(ALPHA)
        time.sleep(1.6)
        file.write_text(GOOD)
        time.sleep(3)
        status = status_of(daemon.state, "beta")
        assert status is not None and pids(status) == beta and all(alive(pid) for pid in beta)
        assert any("default/beta is not in" in m for m in daemon.logged("manifest")), "the cut was never seen"

        # Really removed: gone, but only after the confirming read.
        removed_at = time.monotonic()
        file.write_text(ALPHA)
        until(
            lambda: status_of(daemon.state, "beta"), lambda s: s is None, within=30, what="beta's status gone"
        )
        assert status_of(daemon.state, "beta") is None
        assert time.monotonic() - removed_at >= 2.0
        assert etcd_pids_under(daemon.state / "default" / "beta") == []
        assert any((daemon.state / "default" / "beta" / "members").glob("*/data/member/wal"))
    finally:
        daemon.stop()


def test_a_new_invalid_cluster_gets_a_status_until_it_is_mended_or_gone(workdir):
    file = workdir / "clusters.yaml"
    file.write_text(ALPHA)
    daemon = Daemon(workdir, file)
    try:
        wait_status(daemon.state, "alpha", healthy(1))
        file.write_text(ALPHA + "---\n" + DOC.format(name="gamma", size=0, tls="false"))
        gamma = wait_status(daemon.state, "gamma", lambda s: True, timeout=10)
        assert problem(gamma) == "spec.size: must be between 1 and 9 (got 0)"
        assert gamma["message"] == "not created: spec.size: must be between 1 and 9 (got 0)"
        assert gamma["members"] == [] and gamma["phase"] == "Creating"
        events = (daemon.state / "default" / "gamma" / "events.jsonl").read_text()
        assert '"reason": "InvalidSpec"' in events
        daemon.wait_board(
            "default/gamma  Creating  ready 0/0  not created: spec.size: must be between 1 and 9"
        )

        # Mended: created like any new cluster.
        file.write_text(ALPHA + "---\n" + DOC.format(name="gamma", size=1, tls="false"))
        wait_status(daemon.state, "gamma", healthy(1))

        # Invalid, then out of the file: its status goes with it.
        file.write_text(ALPHA + "---\n" + DOC.format(name="delta", size=10, tls="false") + "---\n" + GAMMA_OK)
        assert problem(wait_status(daemon.state, "delta", lambda s: True, timeout=10)).startswith("spec.size")
        file.write_text(ALPHA + "---\n" + GAMMA_OK)
        until(
            lambda: status_of(daemon.state, "delta"),
            lambda s: s is None,
            within=10,
            what="delta's status gone",
        )
        assert status_of(daemon.state, "delta") is None
        assert status_of(daemon.state, "gamma")["phase"] == "Running"
    finally:
        daemon.stop()


GAMMA_OK = DOC.format(name="gamma", size=1, tls="false")

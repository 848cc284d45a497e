"""A person's way into a local TLS cluster (`local env`), and relative paths given to `local`:
a real daemon process started from a working directory, real etcd members, real etcdctl."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from actors.model import ClusterRef
from supervisor.local.env import env_command
from tests.cli.test_local_command import CLI, DOC, healthy, status_of, wait_status
from tests.harness.procs import etcd_pids_under

ETCDCTL = Path(sys.executable).parent / "etcdctl"


def start_relative(workdir: Path, file: str, state: str) -> subprocess.Popen:
    """`etcd-supervisor local FILE --state-dir DIR` as typed in a shell in workdir."""
    return subprocess.Popen(
        [str(CLI), "local", file, "--state-dir", state, "--no-board"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(daemon: subprocess.Popen) -> str:
    daemon.send_signal(signal.SIGTERM)
    _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err[-2000:]
    return err


def shell(workdir: Path, script: str) -> subprocess.CompletedProcess[str]:
    """bash in workdir, with no ETCDCTL_* of ours leaking in: only what the script sets counts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL_")}
    return subprocess.run(
        ["bash", "-c", script], cwd=workdir, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_relative_state_dir_with_tls_starts_and_serves(workdir):
    # Before: etcd got "st/default/t/members/t-0/tls/member.crt" while running in another cwd.
    (workdir / "c.yaml").write_text(DOC.format(name="t", size=1, tls="true"))
    daemon = start_relative(workdir, "c.yaml", "st")
    try:
        status = wait_status(workdir / "st", "t", healthy(1), timeout=30)
        assert status["members"][0]["clientURL"].startswith("https://")
    finally:
        stop(daemon)
    assert etcd_pids_under(workdir / "st") == []


def test_local_env_points_etcdctl_at_a_tls_cluster(workdir):
    (workdir / "c.yaml").write_text(
        DOC.format(name="demo", size=3, tls="true") + "---\n" + DOC.format(name="plain", size=1, tls="false")
    )
    env = f"{CLI} local env default/demo --state-dir st"
    daemon = start_relative(workdir, "c.yaml", "st")
    try:
        wait_status(workdir / "st", "demo", healthy(3))
        plain = wait_status(workdir / "st", "plain", healthy(1))

        done = shell(
            workdir, f'eval "$({env})" && {ETCDCTL} put foo bar && {ETCDCTL} get foo --print-value-only'
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["OK", "bar"]

        exports = shell(workdir, env).stdout
        assert exports.startswith("export ETCDCTL_ENDPOINTS=https://127.0.0.1:")
        for variable, file in [("CACERT", "ca.crt"), ("CERT", "client.crt"), ("KEY", "client.key")]:
            assert f"ETCDCTL_{variable}={workdir / 'st' / 'default' / 'demo' / 'tls' / file}" in exports

        # Without the certificates etcdctl cannot get in: they are what makes the difference.
        endpoints = ",".join(m["clientURL"] for m in status_of(workdir / "st", "demo")["members"])
        bare = shell(
            workdir, f"{ETCDCTL} --endpoints={endpoints} --dial-timeout=2s --command-timeout=3s get foo"
        )
        assert bare.returncode != 0

        # A plain cluster: endpoints only, and a shell's TLS variables of another cluster are unset.
        plain_env = shell(workdir, f"{CLI} local env plain --state-dir st").stdout
        assert plain_env == (
            f"export ETCDCTL_ENDPOINTS={plain['members'][0]['clientURL']}\n"
            "unset ETCDCTL_CACERT ETCDCTL_CERT ETCDCTL_KEY\n"
        )
        both = f'eval "$({env})"; eval "$({CLI} local env plain --state-dir st)"'
        out = shell(workdir, f'{both}; echo "${{ETCDCTL_CACERT-unset}}"; {ETCDCTL} put k v')
        assert out.stdout.splitlines() == ["unset", "OK"], out.stderr

        unknown = shell(workdir, f"{CLI} local env default/nope --state-dir st")
        assert unknown.returncode == 1 and unknown.stdout == ""
        assert "no cluster default/nope" in unknown.stderr and "default/demo" in unknown.stderr
        malformed = shell(workdir, f"{CLI} local env a/b/c --state-dir st")
        assert malformed.returncode == 1 and "NAMESPACE/NAME" in malformed.stderr
    finally:
        stop(daemon)


def test_local_file_still_means_a_file_and_two_positionals_need_env(workdir):
    # `local FILE` is unchanged by `local env`: one positional is a file, even one named env.
    extra = shell(workdir, f"{CLI} local c.yaml other")
    assert extra.returncode == 2 and "one too many" in extra.stderr
    missing = shell(workdir, f"{CLI} local env")
    assert missing.returncode == 2 and "local env needs NAMESPACE/NAME" in missing.stderr
    assert not (workdir / ".state").exists()
    status = json.dumps({"phase": "Running", "members": []})
    (workdir / ".state" / "default" / "empty").mkdir(parents=True)
    (workdir / ".state" / "default" / "empty" / "status.json").write_text(status)
    none_yet = shell(workdir, f"{CLI} local env default/empty")
    assert none_yet.returncode == 1 and "no members serving clients yet" in none_yet.stderr


def test_the_board_shows_the_command_as_typed_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    below = env_command(tmp_path / ".state", ".venv/bin/etcd-supervisor")
    assert below(ClusterRef("default", "demo")) == (
        'eval "$(.venv/bin/etcd-supervisor local env default/demo --state-dir .state)"'
    )
    elsewhere = env_command(Path("/srv/etcd state"), "etcd-supervisor")
    assert elsewhere(ClusterRef("apps", "cache")) == (
        "eval \"$(etcd-supervisor local env apps/cache --state-dir '/srv/etcd state')\""
    )


RENEWING = """\
apiVersion: etcd.io/v1alpha1
kind: EtcdCluster
metadata: {name: short, namespace: default}
spec:
  size: 1
  security: {tls: {enabled: true, certificates: {validity: 40s, renewBefore: 25s}}}
"""


def test_local_env_printed_before_a_renewal_still_gets_in_after_it(workdir):
    (workdir / "c.yaml").write_text(RENEWING)
    env = f"{CLI} local env default/short --state-dir st"
    daemon = start_relative(workdir, "c.yaml", "st")
    try:
        first = wait_status(workdir / "st", "short", lambda s: healthy(1)(s) and "tls" in s)
        assert "lastRotation" not in first["tls"]
        exports = shell(workdir, env).stdout  # what a person's shell holds from now on
        # Leaves live 40 s and are renewed with 25 s left: in ~15 s, the daemon's status says so.
        renewed = wait_status(
            workdir / "st",
            "short",
            lambda s: (
                "lastRotation" in s.get("tls", {}) and s["tls"]["leafNotAfter"] > first["tls"]["leafNotAfter"]
            ),
            timeout=45,
        )
        assert renewed["tls"]["lastRotation"]["kind"] == "leaf"
        valid = {c["type"]: c for c in renewed["conditions"]}["CertificatesValid"]
        assert (valid["status"], valid["reason"]) == ("True", "Valid")
        done = shell(
            workdir, f"{exports}\n{ETCDCTL} put after renewal && {ETCDCTL} get after --print-value-only"
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["OK", "renewal"]
        assert shell(workdir, env).stdout == exports  # the same paths, now holding the new certificate
    finally:
        stop(daemon)
    assert etcd_pids_under(workdir / "st") == []

"""spec.podTemplate under `etcd-supervisor local`: the same manifest as on Kubernetes is accepted,
the status says it is ignored (SpecIgnored) and the log says so once; no member restarts for it."""

import json
import signal

from tests.cli.test_local_command import DOC as CLUSTER
from tests.cli.test_local_command import healthy, start, status_of, wait_status
from tests.harness.poll import until
from tests.harness.procs import etcd_pids_under

DOC = CLUSTER.format(name="demo", size=1, tls="false")
TEMPLATE = """\
  podTemplate:
    metadata: {labels: {team: storage}}
    spec:
      tolerations: [{key: dedicated, operator: Equal, value: etcd, effect: NoSchedule}]
      nodeSelector: {disk: ssd}
      priorityClassName: etcd-critical
"""


def ignored(status: dict) -> dict:
    return next((c for c in status["conditions"] if c["type"] == "SpecIgnored"), {})


def test_a_pod_template_is_accepted_reported_as_ignored_and_restarts_nothing(tmp_path):
    file, state = tmp_path / "clusters.yaml", tmp_path / "state"
    file.write_text(DOC)
    daemon = start(file, state)
    try:
        before = wait_status(state, "demo", healthy(1))
        assert ignored(before) == {}
        (pid,) = [m["pid"] for m in before["members"]]

        file.write_text(DOC + TEMPLATE)
        after = wait_status(state, "demo", lambda s: ignored(s).get("status") == "True")
        condition = ignored(after)
        assert condition["reason"] == "KubernetesOnly"
        assert condition["message"].startswith("spec.podTemplate applies on Kubernetes only")
        assert healthy(1)(after) and [m["pid"] for m in after["members"]] == [pid]

        file.write_text(DOC)
        until(
            lambda: status_of(state, "demo"),
            lambda s: s is not None and ignored(s) == {},
            within=30,
            every=0.3,
            what="SpecIgnored gone with the template",
        )
        assert [m["pid"] for m in status_of(state, "demo")["members"]] == [pid]
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err[-2000:]
    assert etcd_pids_under(state) == []
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    said = [line for line in lines if line.get("event") == "spec-ignored"]
    assert len(said) == 1, said
    assert "spec.podTemplate applies on Kubernetes only" in said[0]["message"]
    events = (state / "default" / "demo" / "events.jsonl").read_text().splitlines()
    audit = [json.loads(line)["reason"] for line in events]
    assert "MemberRolled" not in audit, audit

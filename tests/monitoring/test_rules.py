"""The alert rules: valid (promtool check rules), behaving as their unit tests say (promtool test
rules, tests/monitoring/rules_test.yaml), and shipped identically as a PrometheusRule and in the chart."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.harness.prometheus import RULES, require_promtool

HERE = Path(__file__).parent
DEPLOY = RULES.parents[1]


def promtool(*args: str) -> str:
    done = subprocess.run([str(require_promtool()), *args], capture_output=True, text=True, cwd=HERE)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_rules_pass_promtool_check_and_their_unit_tests() -> None:
    assert "SUCCESS: 18 rules found" in promtool("check", "rules", str(RULES))
    assert "SUCCESS" in promtool("test", "rules", "rules_test.yaml")


def test_every_alert_has_a_unit_test_and_a_runbook() -> None:
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tests = yaml.safe_load((HERE / "rules_test.yaml").read_text())["tests"]
    tested = {case["alertname"] for t in tests for case in t.get("alert_rule_test", []) if case["exp_alerts"]}
    assert alerts == tested
    readme = (DEPLOY.parent / "README.md").read_text()
    assert all(f"**{alert}**" in readme for alert in alerts), "README Monitoring: a runbook entry per alert"


def test_prometheus_rule_and_chart_ship_the_same_rules() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rule = yaml.safe_load((DEPLOY / "monitoring" / "prometheusrule.yaml").read_text())
    assert rule["kind"] == "PrometheusRule" and rule["spec"]["groups"] == groups
    chart_copy = DEPLOY / "helm" / "etcd-operator" / "files" / "rules.yaml"
    assert chart_copy.read_text() == RULES.read_text()

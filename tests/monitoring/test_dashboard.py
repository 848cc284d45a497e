"""The Grafana dashboard: well-formed, one row per concern, every query valid PromQL (promtool
parses them as recording rules), and shipped identically by the chart. The Prometheus test runs
its queries against real series."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.harness.prometheus import require_promtool
from tests.monitoring.dashboard import DASHBOARD, ROWS, load, queries_by_row


def test_structure_one_row_per_concern_no_overlap() -> None:
    dashboard = load()
    assert dashboard["uid"] == "etcd-supervisor" and dashboard["schemaVersion"] >= 36
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    assert tuple(p["title"] for p in panels if p["type"] == "row") == ROWS
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert names == {"datasource", "namespace", "cluster"}
    taken: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & taken, f"{p['title']} overlaps another panel"
        taken |= cells
        if p["type"] != "row":
            assert p["targets"] and all(t["expr"] and t["refId"] for t in p["targets"]), p["title"]
            assert p["datasource"]["uid"] == "${datasource}"


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    exprs = [e for row in queries_by_row().values() for e in row]
    rules = {
        "groups": [
            {"name": "dashboard", "rules": [{"record": f"q{i}", "expr": e} for i, e in enumerate(exprs)]}
        ]
    }
    file = tmp_path / "dashboard-queries.yaml"
    file.write_text(yaml.safe_dump(rules))
    done = subprocess.run(
        [str(require_promtool()), "check", "rules", str(file)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in done.stdout


def test_chart_ships_the_same_dashboard() -> None:
    chart_copy = DASHBOARD.parents[1] / "helm" / "etcd-operator" / "files" / "grafana-dashboard.json"
    assert chart_copy.read_text() == DASHBOARD.read_text()

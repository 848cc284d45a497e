"""The Grafana dashboard's queries, with its variables filled in, for the tests to check and run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "monitoring" / "grafana-dashboard.json"
ROWS = (
    "Cluster health",
    "Members",
    "Latency and throughput (etcd's own metrics)",
    "Database size vs quota",
    "Backups",
    "Operator",
)


def load() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def queries_by_row(namespace: str = "default", cluster: str = ".*", rate: str = "1m") -> dict[str, list[str]]:
    """Row title -> the PromQL of its panels, $namespace, $cluster and $__rate_interval filled in."""
    rows: dict[str, list[str]] = {}
    current = ""
    for panel in load()["panels"]:
        if panel["type"] == "row":
            current = panel["title"]
            rows[current] = []
            continue
        for target in panel["targets"]:
            expr = target["expr"].replace("$namespace", namespace).replace("$cluster", cluster)
            rows[current].append(expr.replace("$__rate_interval", rate))
    return rows

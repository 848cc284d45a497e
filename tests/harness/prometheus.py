"""A real Prometheus server (Debian's `prometheus` package) for the tests, and its HTTP API.

`make setup` installs the package where apt exists (the `prometheus` target of the Makefile);
elsewhere the tests that need it skip, or fail under CI=true.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.harness.components import MissingComponent, require
from tests.harness.poll import until

RULES = Path(__file__).resolve().parents[2] / "deploy" / "monitoring" / "rules.yaml"


def _find(name: str) -> Path:
    found = shutil.which(name)
    if found is None:
        raise MissingComponent(f"{name} not found (Debian package `prometheus`: make setup installs it)")
    return Path(found)


def require_promtool() -> Path:
    return require("promtool", lambda: _find("promtool"))


def require_prometheus() -> Path:
    return require("prometheus", lambda: _find("prometheus"))


def fast_rules(dest: Path, *, hold: str = "2s") -> Path:
    """rules.yaml with every `for:` shortened to `hold`: the same expressions, alerts in seconds."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = hold
    dest.write_text(yaml.safe_dump(rules))
    return dest


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def _get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{self.url}{path}{query}: {exc}: {exc.read()!r}") from None
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant query: {labels (sorted pairs, without __name__): value}."""
        data = self._get("/api/v1/query", query=expr)
        return {
            tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")): float(r["value"][1])
            for r in data["result"]
        }

    def value(self, expr: str) -> float | None:
        """The value of a query expected to give at most one series."""
        found = self.query(expr)
        assert len(found) <= 1, found
        return next(iter(found.values()), None)

    def firing(self) -> list[dict[str, Any]]:
        return [a for a in self._get("/api/v1/alerts")["alerts"] if a["state"] == "firing"]

    def targets_up(self, job: str) -> int:
        return sum(
            1
            for t in self._get("/api/v1/targets")["activeTargets"]
            if t["labels"].get("job") == job and t["health"] == "up"
        )


@contextmanager
def running_prometheus(
    workdir: Path, scrape_configs: list[dict[str, Any]], rules: Path
) -> Iterator[Prometheus]:
    """Prometheus scraping and evaluating every second, on a free loopback port, for the block."""
    binary = require_prometheus()
    workdir.mkdir(parents=True, exist_ok=True)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": scrape_configs,
    }
    config_file = workdir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    log = (workdir / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            str(binary),
            f"--config.file={config_file}",
            f"--storage.tsdb.path={workdir / 'data'}",
            "--web.listen-address=127.0.0.1:0",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = until(
            lambda: _listening_url(workdir / "prometheus.log"), within=30, what="prometheus listening"
        )
        until(lambda: _ready(url), within=30, what="prometheus ready (/-/ready)")
        yield Prometheus(url)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:  # refused, or 503 while the TSDB opens
        return False


def _listening_url(log: Path) -> str | None:
    # Prometheus logs `msg="Listening on" address=127.0.0.1:PORT` (port 0 is resolved there).
    for line in log.read_text().splitlines():
        if "Listening on" in line and "address=" in line:
            address = line.split("address=", 1)[1].split()[0].strip('"')
            return f"http://{address}"
    return None

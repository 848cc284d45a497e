"""What a test may use of the cluster the e2e tier runs on, whichever it is."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
import pytest
import yaml

from tests.harness.kube import kubectl


class BuiltInNodes(Protocol):
    """What the tests use of a built-in cluster (tests/harness/node.py's one node, nodes.py's
    three): images loaded onto it, and this host resolving names through its DNS."""

    def import_image(self, archive: Path) -> None: ...

    def cluster_dns_command(self, cmd: Sequence[str | os.PathLike[str]]) -> list[str]: ...


@attrs.define
class Cluster:
    """What a test may use, whichever cluster runs it."""

    kubeconfig: Path
    etcd_version: str
    node: BuiltInNodes | None = None  # the built-in node(s); None on an external cluster

    def kubectl(
        self,
        *args: str | os.PathLike[str],
        input: str | None = None,
        check: bool = True,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        return kubectl(*args, kubeconfig=self.kubeconfig, input=input, check=check, timeout=timeout)

    def get_json(self, *args: str, namespace: str | None = None) -> Any:

        ns = ["-n", namespace] if namespace else []
        return json.loads(self.kubectl("get", *args, *ns, "-o", "json").stdout)

    def apply(self, objs: Sequence[dict[str, Any]] | str, namespace: str | None = None) -> None:
        text = objs if isinstance(objs, str) else yaml.safe_dump_all(objs)
        ns = ["-n", namespace] if namespace else []
        self.kubectl("apply", *ns, "-f", "-", input=text)

    def create_namespace(self, prefix: str) -> str:
        name = f"{prefix[:30].lower().replace('_', '-').strip('-')}-{uuid.uuid4().hex[:6]}"
        self.kubectl("create", "namespace", name)
        return name

    def host_dns_command(self, cmd: Sequence[str | os.PathLike[str]]) -> list[str]:
        """``cmd`` on this host, resolving cluster names as a pod does (built-in node only)."""
        if self.node is None:  # an external cluster (E2E_KUBECONFIG): no component is missing
            pytest.skip("resolving cluster DNS from this host needs the built-in node")
        return self.node.cluster_dns_command(cmd)

"""Fixtures for the e2e tier: real pods on a real Kubernetes.

``E2E_KUBECONFIG`` names an existing cluster (kind, say: images must already be there, see
``E2E_ETCD_VERSION``); without it the built-in one-node cluster (tests/harness/node.py) starts
once for these tests and is torn down afterwards, leaving nothing behind. It needs root and the
node's components (``make node``): missing, the tests skip, or fail under CI=true.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from actors.model import DEFAULT_VERSION
from tests.harness import images
from tests.harness.components import MissingComponent, missing, require
from tests.harness.kube import kubectl
from tests.harness.node import ROOT, Node, open_node


@attrs.define
class Cluster:
    """What a test may use, whichever cluster runs it."""

    kubeconfig: Path
    etcd_version: str
    node: Node | None = None  # the built-in node; None on an external cluster

    def kubectl(
        self,
        *args: str | os.PathLike[str],
        input: str | None = None,
        check: bool = True,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        return kubectl(*args, kubeconfig=self.kubeconfig, input=input, check=check, timeout=timeout)

    def get_json(self, *args: str, namespace: str | None = None) -> Any:
        import json

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
        if self.node is None:
            pytest.skip("resolving cluster DNS from this host needs the built-in node")
        return self.node.cluster_dns_command(cmd)


# Package scope: the node stops once the e2e tests are done, not at the end of the whole run,
# so it costs the rest of a `make test` nothing.
@pytest.fixture(scope="package")
def e2e_cluster() -> Iterator[Cluster]:
    external = os.environ.get("E2E_KUBECONFIG")
    if external:
        yield Cluster(Path(external), os.environ.get("E2E_ETCD_VERSION", DEFAULT_VERSION))
        return
    if os.geteuid() != 0:
        missing("the built-in node needs root (or set E2E_KUBECONFIG to an existing cluster)")
    with contextlib.ExitStack() as stack:
        try:
            node = stack.enter_context(open_node())
        except MissingComponent as exc:
            missing(str(exc))
        print(f"\nbuilt-in node started in {node.start_seconds:.1f}s")
        archive, version = require("etcd image", lambda: images.etcd_archive(ROOT / "images"))
        node.import_image(archive)
        yield Cluster(node.kubeconfig, version, node)


@pytest.fixture
def e2e_namespace(e2e_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    ns = e2e_cluster.create_namespace(request.node.name.removeprefix("test_"))
    yield ns
    e2e_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)

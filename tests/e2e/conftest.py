"""Fixtures for the e2e tier: real pods on a real Kubernetes.

``E2E_KUBECONFIG`` names an existing cluster (kind, say: images must already be there, see
``E2E_ETCD_VERSION``); without it the built-in one-node cluster (tests/harness/node.py) starts
once for these tests and is torn down afterwards, leaving nothing behind. It needs root and the
node's components (``make node``): missing, the tests skip, or fail under CI=true.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.model import DEFAULT_VERSION
from tests.harness import images
from tests.harness.cluster import Cluster
from tests.harness.components import MissingComponent, missing, require
from tests.harness.formation import run_operator
from tests.harness.node import ROOT, open_node


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


@pytest.fixture(scope="package")
def operator_image(e2e_cluster: Cluster) -> str:
    """The operator image (deploy/base's tag): built and imported once on the built-in node;
    elsewhere it must be loaded already."""
    if e2e_cluster.node is not None:
        archive = require("operator image", lambda: images.operator_archive(ROOT / "images"))
        e2e_cluster.node.import_image(archive)
    return images.OPERATOR_IMAGE


@pytest.fixture
def e2e_namespace(e2e_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    ns = e2e_cluster.create_namespace(request.node.name.removeprefix("test_"))
    yield ns
    e2e_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture
def operator(e2e_cluster: Cluster, e2e_namespace: str, tmp_path: Path, operator_image: str) -> Iterator[Path]:
    """The operator on this host, watching this test's namespace; yields its log file. It knows
    its image, as in the cluster, so it makes warm member pods (supervisor/kube/warm_members.py)."""
    # On the built-in node, beside the node's own logs (kept in node.LOGS after the session).
    work, logs = (ROOT / "operator", ROOT / "logs") if e2e_cluster.node else (tmp_path, tmp_path)
    log = logs / f"operator-{e2e_namespace}.log"
    try:
        with run_operator(e2e_cluster, e2e_namespace, work, log, helper_image=operator_image):
            yield log
    finally:
        lines = log.read_text(errors="replace").splitlines(True)
        # Its steps and Events first: why a pod was replaced, say (a failed learner's exit code
        # and last log line ride on the step that starts it again); then the tail.
        steps = [ln for ln in lines if "actors.cluster:" in ln or "supervisor.kube.status:" in ln]
        print(f"operator steps and Events (last 40):\n{''.join(steps[-40:])}")
        # What went wrong out of the cluster actor's sight (a backup's verify pod, say).
        warnings = [ln for ln in lines if " WARNING " in ln or " ERROR " in ln]
        print(f"operator warnings and errors (last 20):\n{''.join(warnings[-20:])}")
        print(f"operator log (tail):\n{''.join(lines[-15:])}")

"""Fixtures for the kube tier: a real kube-apiserver (see tests/harness/kube.py for the API).

Startup costs seconds, so one server serves the whole session; tests isolate their data by
namespace (``kube_namespace``). A test that restarts or otherwise disturbs the server takes
``private_kube_apiserver`` instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.kube import KubeAPIServer, open_kube_apiserver


@pytest.fixture(scope="session")
def kube_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPIServer]:
    with open_kube_apiserver(tmp_path_factory.mktemp("kube-apiserver")) as server:
        yield server


@pytest.fixture(scope="session")
def kube_crds(kube_apiserver: KubeAPIServer) -> KubeAPIServer:
    """The session server with crds/ applied and Established."""
    kube_apiserver.apply_crds()
    return kube_apiserver


@pytest.fixture(scope="session")
def operator_kubeconfig(kube_apiserver: KubeAPIServer) -> Path:
    """Kubeconfig of the deployed operator's ServiceAccount (deploy/base applied)."""
    return kube_apiserver.operator_kubeconfig()


@pytest.fixture
def kube_namespace(kube_apiserver: KubeAPIServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test. Deleted afterwards without waiting: with no
    controller-manager it stays Terminating, but its unique name keeps tests apart."""
    ns = kube_apiserver.create_namespace(request.node.name)
    yield ns
    kube_apiserver.kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture
def private_kube_apiserver(tmp_path: Path) -> Iterator[KubeAPIServer]:
    """A server of this test's own, with the CRDs applied: for restarts and other disruption."""
    with open_kube_apiserver(tmp_path / "kube-apiserver") as server:
        server.apply_crds()
        yield server

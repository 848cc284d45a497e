"""The two clients most kube tests need: the operator's (as the deployed ServiceAccount) and an admin's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from supervisor.aio import open_asyncio_loop
from supervisor.kube.client import KubeClient, open_kube_client
from tests.harness.kube import KubeAPIServer


@asynccontextmanager
async def clients(server: KubeAPIServer, operator: Path) -> AsyncIterator[tuple[KubeClient, KubeClient]]:
    """(operator client, admin client), inside one asyncio loop."""
    async with (
        open_asyncio_loop(),
        open_kube_client(str(operator)) as op,
        open_kube_client(str(server.kubeconfig)) as admin,
    ):
        yield op, admin

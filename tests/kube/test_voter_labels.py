"""The disruption budget follows the voters on a real kube-apiserver (VoterLabels, the I/O of
supervisor/kube/voter_budget.py): pods labelled by role, minAvailable the voters' quorum, and
around a promotion and a removal the budget written before the step is safe for both sides.

etcd's membership here is a list the test changes in its steps (what the cluster's admin
would read); the eviction arithmetic on this budget runs on the real node
(tests/e2e/test_disruption_budget.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from actors.model import ClusterRef, ClusterSpec, EtcdMember
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient
from supervisor.kube.runtime import KubeRuntime
from supervisor.kube.voter_budget import promoted, removed
from supervisor.kube.voter_labels import VoterLabels
from tests.harness.kube import KubeAPIServer
from tests.kube.clients import clients
from tests.kube.test_runtime import create_cluster, launch_for

pytestmark = pytest.mark.slow


async def _seen(admin: KubeClient, ref: ClusterRef, names: Sequence[str]) -> tuple[Any, dict[str, str]]:
    budget = await admin.get(m.pdb_path(ref.namespace, m.disruption_budget_name(ref)))
    labels = {}
    for name in names:
        pod = await admin.get(m.core_path(ref.namespace, "pods", name))
        labels[name] = pod["metadata"]["labels"].get("etcd.io/voter")
    return budget["spec"]["minAvailable"], labels


async def test_the_budget_follows_the_voters_through_a_promotion_and_a_removal(
    kube_apiserver: KubeAPIServer, operator_kubeconfig: Path, kube_namespace: str
) -> None:
    ns = kube_namespace
    ref = ClusterRef(ns, "votes")
    names = [f"votes-{i}" for i in range(4)]
    async with clients(kube_apiserver, operator_kubeconfig) as (op, admin):
        await create_cluster(admin, ns, "votes")
        runtime = KubeRuntime(op)
        spec = ClusterSpec(size=3)
        for name in names:
            urls = await runtime.allocate_member(ref, name, spec)
            await runtime.start_member(launch_for(ref, name, urls, spec))
        assert (await _seen(admin, ref, names)) == ("100%", dict.fromkeys(names, "false"))

        etcd = [EtcdMember(i, name, (), (), i == 3) for i, name in enumerate(names)]

        async def member_list() -> Sequence[EtcdMember]:
            return list(etcd)

        labels = VoterLabels(op, ref, runtime.voter_budgets)
        await labels.read(member_list)
        voters = {name: "true" for name in names[:3]}
        assert (await _seen(admin, ref, names)) == (2, {**voters, "votes-3": "false"})

        during: list[Any] = []

        async def promote() -> None:
            during.append(await _seen(admin, ref, names))
            etcd[:] = promoted(etcd, 3)

        await labels.change(member_list, promote, lambda now: promoted(now, 3))
        # Before: votes-3 labelled and counted one extra against three voters' quorum (2 + 1);
        # after: four voters, quorum 3.
        assert during == [(3, dict.fromkeys(names, "true"))]
        assert (await _seen(admin, ref, names)) == (3, dict.fromkeys(names, "true"))

        async def remove() -> None:
            during.append(await _seen(admin, ref, names))
            etcd[:] = removed(etcd, 0)

        await labels.change(member_list, remove, lambda now: removed(now, 0))
        # Before: votes-0 still labelled, minAvailable enough for three voters plus it (2 + 1);
        # after: its label off, the quorum of three.
        assert during[1] == (3, dict.fromkeys(names, "true"))
        assert (await _seen(admin, ref, names)) == (
            2,
            {"votes-0": "false", **dict.fromkeys(names[1:], "true")},
        )

        # A voter's pod made again (after a crash) is labelled a voter as it is made.
        await admin.delete(m.core_path(ns, "pods", "votes-1"), grace_period_seconds=0)
        urls = await runtime.allocate_member(ref, "votes-1", spec)
        await runtime.start_member(launch_for(ref, "votes-1", urls, spec))
        assert (await _seen(admin, ref, ["votes-1"]))[1] == {"votes-1": "true"}

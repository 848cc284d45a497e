"""Keeps the disruption budget on the voters as the membership changes (the decision is
voter_budget.py; this is its I/O).

It sits in each cluster's etcd admin (SecretTlsAdmin, clusters.py), where every membership
read and change goes: the cluster actor never learns of labels or budgets. A read brings the
pods' labels and minAvailable to the membership read; a promotion or removal first writes a
budget safe for the membership before and after it, and is refused (held off, retried) if
that write is refused. New member pods are labelled as they are made, from what was last
written here (KubeRuntime). One lock per
cluster orders these writes with the reads: a membership read before a step never writes its
older budget after the step.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import trio

from actors.model import ClusterRef, EtcdMember
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError, is_not_found
from supervisor.kube.pods import meta
from supervisor.kube.voter_budget import (
    VOTER_LABEL,
    VoterBudget,
    budget_for,
    during,
    writes,
)

log = logging.getLogger(__name__)

# Labels are looked at again this often even when the membership did not change: a pod made
# while the membership was not known yet (a new cluster's seed), or a label edited by hand.
RESYNC_EVERY = 5.0

T = TypeVar("T")


class VoterBudgets:
    """What was last written per cluster: the runtime builds the budget from it when it makes
    sure of the cluster's objects (so that correcting drift never undoes a step's write)."""

    def __init__(self) -> None:
        self._written: dict[ClusterRef, VoterBudget] = {}

    def min_available(self, ref: ClusterRef) -> int | None:
        budget = self._written.get(ref)
        return None if budget is None else budget.min_available

    def get(self, ref: ClusterRef) -> VoterBudget | None:
        return self._written.get(ref)

    def set(self, ref: ClusterRef, budget: VoterBudget) -> None:
        self._written[ref] = budget

    def forget(self, ref: ClusterRef) -> None:
        self._written.pop(ref, None)


class VoterLabels:
    """The writes for one cluster."""

    def __init__(
        self,
        client: KubeClient,
        ref: ClusterRef,
        budgets: VoterBudgets,
        *,
        resync_every: float = RESYNC_EVERY,
    ) -> None:
        self._client = client
        self._ref = ref
        self._budgets = budgets
        self._resync_every = resync_every
        self._synced_at: float | None = None
        self._lock = trio.Lock()

    async def read(self, member_list: Callable[[], Awaitable[Sequence[EtcdMember]]]) -> Sequence[EtcdMember]:
        """A membership read; the budget follows it when it changed (or is due a look at new
        pods). A refused write is logged and tried again on the next read: the read itself
        stands."""
        async with self._lock:
            members = await member_list()
            target = budget_for(members)
            now = trio.current_time()
            due = self._synced_at is None or now - self._synced_at >= self._resync_every
            if due or self._budgets.get(self._ref) != target:
                await self._quietly(target)
            return members

    async def change(
        self,
        member_list: Callable[[], Awaitable[Sequence[EtcdMember]]],
        step: Callable[[], Awaitable[T]],
        expected: Callable[[Sequence[EtcdMember]], Sequence[EtcdMember]],
    ) -> T:
        """A membership step, `expected` the membership it makes of the one read before it,
        with a budget safe for both written before (voter_budget.during; a KubeError refuses
        the step) and the budget of the membership read after it written after."""
        async with self._lock:
            members = await member_list()
            await self._apply(during(members, expected(members)))
            out = await step()
            try:
                after = budget_for(await member_list())
            except Exception as exc:  # the next read writes it; until then the stricter budget stands
                log.info(
                    "membership of %s not read after a step (%s): budget written next read", self._ref, exc
                )
                return out
            await self._quietly(after)
            return out

    async def _quietly(self, target: VoterBudget) -> None:
        try:
            await self._apply(target)
        except KubeError as exc:
            self._synced_at = None
            log.warning("disruption budget of %s not brought to its voters: %s", self._ref, exc)

    async def _apply(self, target: VoterBudget) -> None:
        ns = self._ref.namespace
        query = {"labelSelector": m.label_selector(m.member_selector(self._ref))}
        pods = (await self._client.list_all(m.core_path(ns, "pods"), query=query)).get("items") or []
        labels = {
            meta(pod)["labels"].get(m.LABEL_MEMBER, ""): meta(pod)["labels"].get(VOTER_LABEL)
            for pod in pods
            if not meta(pod).get("deletionTimestamp")
        }
        todo = writes(labels, target)
        for member in todo.unlabel:
            await self._label(member, target.label(member))
        await self._min_available(target.min_available)
        # What the budget now protects is at most what it did: ensure() may write it back.
        self._budgets.set(self._ref, target)
        for member in todo.label:
            await self._label(member, target.label(member))
        self._synced_at = trio.current_time()

    async def _label(self, member: str, value: str) -> None:
        path = m.core_path(self._ref.namespace, "pods", member)
        try:
            await self._client.merge_patch(path, {"metadata": {"labels": {VOTER_LABEL: value}}})
        except KubeError as exc:
            if not is_not_found(exc):  # gone: nothing to protect or to count
                raise

    async def _min_available(self, value: int) -> None:
        # The whole spec the budget owns, so an older operator's budget (maxUnavailable over
        # every member pod) becomes this one in one write.
        spec = {
            "minAvailable": value,
            "maxUnavailable": None,
            "selector": {
                "matchLabels": m.disruption_budget(m.Owner(self._ref, ""), value)["spec"]["selector"][
                    "matchLabels"
                ]
            },
        }
        path = m.pdb_path(self._ref.namespace, m.disruption_budget_name(self._ref))
        try:
            await self._client.merge_patch(path, {"spec": spec})
        except KubeError as exc:
            if not is_not_found(exc):  # not made yet: the runtime makes it with this value
                raise

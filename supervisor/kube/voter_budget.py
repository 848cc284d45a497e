"""Which member pods the disruption budget protects, and how many of them must stay. Pure.

The PodDisruptionBudget selects only pods labelled `etcd.io/voter: "true"` and asks for
`minAvailable` of them. The eviction API admits an eviction while more selected pods are
healthy than minAvailable, so after any admitted evictions at least minAvailable labelled pods
stay healthy. At most `extra` of those are not voters (a member being promoted or removed), so
a quorum of voters stays healthy whenever, at every moment, operator running or not:

- every voter's pod is labelled (an unlabelled voter would be evicted unguarded), and
- minAvailable >= quorum(voters) + the labelled pods that are not voters (`safe`).

A membership step from one voting membership to the next is therefore preceded by a budget
safe for both (`during`: the union of both's voters labelled, minAvailable high enough for
either), and followed by the budget of the membership read after it (`budget_for`). Each
change is written stricter-first (`writes`): labels taken off, then minAvailable, then labels
put on, so an operator that dies between any two writes leaves a safe budget. A learner's
pod is labelled "false" and never stands in for a voter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs
from attrs import frozen

from actors.model import EtcdMember

VOTER_LABEL = "etcd.io/voter"
VOTER = "true"
NOT_VOTER = "false"


def quorum(voters: int) -> int:
    return voters // 2 + 1


@frozen
class VoterBudget:
    """The pods labelled as voters (by member name) and the budget's minAvailable."""

    voters: frozenset[str]
    min_available: int

    def label(self, member: str) -> str:
        return VOTER if member in self.voters else NOT_VOTER


def budget_for(members: Sequence[EtcdMember]) -> VoterBudget:
    """The budget for a membership as etcd lists it. A voter that has not started yet has no
    name (no pod to label) but counts toward the quorum all the same."""
    voting = [mem for mem in members if not mem.is_learner]
    return VoterBudget(frozenset(mem.name for mem in voting if mem.name), quorum(len(voting)))


def _needed(labelled: frozenset[str], members: Sequence[EtcdMember]) -> int:
    voting = [mem for mem in members if not mem.is_learner]
    return quorum(len(voting)) + len(labelled - {mem.name for mem in voting})


def safe(budget: VoterBudget, members: Sequence[EtcdMember]) -> bool:
    """Whether no eviction the budget admits can leave fewer than a quorum of voters: every
    named voter labelled, and minAvailable covers the quorum plus the labelled non-voters."""
    named = {mem.name for mem in members if not mem.is_learner and mem.name}
    return named <= budget.voters and budget.min_available >= _needed(budget.voters, members)


def during(before: Sequence[EtcdMember], after: Sequence[EtcdMember]) -> VoterBudget:
    """Written before a step that turns the membership `before` into `after`: safe for both,
    so it holds whether or not the step happened (an operator that dies in between leaves
    it). A promoted learner is labelled and counted one extra before the promotion; a removed
    voter keeps its label, counted one extra after the removal."""
    labelled = budget_for(before).voters | budget_for(after).voters
    return VoterBudget(labelled, max(_needed(labelled, before), _needed(labelled, after)))


def promoted(members: Sequence[EtcdMember], member_id: int) -> tuple[EtcdMember, ...]:
    """The membership after promoting `member_id`."""
    return tuple(attrs.evolve(mem, is_learner=False) if mem.id == member_id else mem for mem in members)


def removed(members: Sequence[EtcdMember], member_id: int) -> tuple[EtcdMember, ...]:
    """The membership after removing `member_id`."""
    return tuple(mem for mem in members if mem.id != member_id)


@frozen
class Writes:
    """What to write to go from the pods' labels to a budget, in the safe order: `unlabel`
    (pods to mark as not voters), then minAvailable, then `label` (pods to mark as voters)."""

    unlabel: tuple[str, ...]
    min_available: int
    label: tuple[str, ...]


def writes(pod_labels: Mapping[str, str | None], target: VoterBudget) -> Writes:
    """The label changes that bring pods (pod name -> its voter label, None when unlabelled)
    to `target`; a pod is named after its member."""
    unlabel = sorted(pod for pod, now in pod_labels.items() if now != target.label(pod) != VOTER)
    label = sorted(pod for pod, now in pod_labels.items() if now != VOTER == target.label(pod))
    return Writes(tuple(unlabel), target.min_available, tuple(label))


def admitted(labels: Mapping[str, str | None], healthy: Iterable[str], min_available: int) -> bool:
    """Whether the eviction API admits one more eviction of a labelled pod: the disruption
    controller's arithmetic (healthy selected pods above minAvailable)."""
    selected = sum(1 for pod in healthy if labels.get(pod) == VOTER)
    return selected > min_available

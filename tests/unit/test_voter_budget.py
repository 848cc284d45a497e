"""The disruption budget over the voters (supervisor/kube/voter_budget.py): examples, and a
simulation of membership steps written as the operator writes them, with the operator dying
at any write and evictions tried between any two writes, checked by the eviction API's rule."""

from __future__ import annotations

import copy
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from actors.model import EtcdMember
from supervisor.kube.voter_budget import (
    NOT_VOTER,
    VOTER,
    VoterBudget,
    admitted,
    budget_for,
    during,
    promoted,
    quorum,
    removed,
    safe,
    writes,
)


def member(i: int, *, learner: bool = False, name: str | None = None) -> EtcdMember:
    return EtcdMember(i, f"m-{i}" if name is None else name, (), (), learner)


def test_the_budget_counts_voters_only() -> None:
    members = [member(1), member(2), member(3), member(4, learner=True)]
    assert budget_for(members) == VoterBudget(frozenset({"m-1", "m-2", "m-3"}), 2)
    assert budget_for([member(i) for i in range(5)]).min_available == 3
    # A voter not started yet has no pod to label but counts toward the quorum.
    assert budget_for([member(1), member(2, name="")]) == VoterBudget(frozenset({"m-1"}), 2)


def test_a_promotion_is_preceded_by_a_budget_safe_before_and_after_it() -> None:
    three = [member(1), member(2), member(3), member(4, learner=True)]
    pre = during(three, promoted(three, 4))
    # m-4 labelled before it votes: counted one extra against the three voters' quorum.
    assert pre == VoterBudget(frozenset({"m-1", "m-2", "m-3", "m-4"}), 3)
    assert safe(pre, three) and safe(pre, promoted(three, 4))


def test_a_removal_keeps_the_label_and_raises_the_budget_until_after_it() -> None:
    five = [member(i) for i in range(1, 6)]
    pre = during(five, removed(five, 5))
    assert pre == VoterBudget(frozenset(f"m-{i}" for i in range(1, 6)), 4)
    assert safe(pre, five) and safe(pre, removed(five, 5))
    assert budget_for(removed(five, 5)).min_available == 3  # lowered only once it is gone


def test_writes_take_labels_off_before_the_budget_and_put_them_on_after() -> None:
    target = VoterBudget(frozenset({"m-1", "m-2"}), 2)
    todo = writes({"m-1": VOTER, "m-2": None, "m-3": VOTER, "m-4": None}, target)
    assert (todo.unlabel, todo.min_available, todo.label) == (("m-3", "m-4"), 2, ("m-2",))
    assert writes({"m-1": VOTER, "m-2": VOTER, "m-3": NOT_VOTER}, target).unlabel == ()


def test_the_issue_scenario_admits_two_evictions_of_five_voters() -> None:
    """Five voters, the operator down, spec.size 3: the budget is the membership's, not the
    spec's, so two evictions are admitted and the third refused."""
    five = [member(i) for i in range(5)]
    budget = budget_for(five)
    labels = {mem.name: budget.label(mem.name) for mem in five}
    healthy = {mem.name for mem in five}
    evicted = []
    for name in sorted(healthy, reverse=True):
        if admitted(labels, healthy, budget.min_available):
            healthy.discard(name)
            evicted.append(name)
    assert evicted == ["m-4", "m-3"] and len(healthy) == quorum(5)


# --- the simulation -------------------------------------------------------------------------


class World:
    """etcd's membership, the member pods (labels, health) and the budget, changed one write at
    a time."""

    def __init__(self, voters: int, learners: int) -> None:
        self.members = [member(i) for i in range(voters)] + [
            member(voters + i, learner=True) for i in range(learners)
        ]
        self.next_id = voters + learners
        start = budget_for(self.members)
        self.labels: dict[str, str | None] = {mem.name: start.label(mem.name) for mem in self.members}
        self.min_available = start.min_available
        self.written = start
        self.healthy = {mem.name for mem in self.members}

    def apply(self, target: VoterBudget) -> Iterator[None]:
        """The writes of VoterLabels._apply, yielding after each."""
        todo = writes(self.labels, target)
        for pod in todo.unlabel:
            self.labels[pod] = target.label(pod)
            yield
        self.min_available = todo.min_available
        self.written = target
        yield
        for pod in todo.label:
            self.labels[pod] = target.label(pod)
            yield

    def change(self, after: list[EtcdMember]) -> Iterator[None]:
        """A membership step as VoterLabels.change writes it."""
        yield from self.apply(during(self.members, after))
        self.members = after
        yield
        yield from self.apply(budget_for(self.members))

    def operator(self, steps: list[tuple[str, int]]) -> Iterator[None]:
        for kind, pick in steps:
            voters = [mem for mem in self.members if not mem.is_learner]
            learners = [mem for mem in self.members if mem.is_learner]
            if kind == "add":
                new = member(self.next_id, learner=True)
                self.next_id += 1
                self.members = [*self.members, new]
                yield
                # Its pod, labelled as KubeRuntime labels a new pod: from what was last written.
                self.labels[new.name] = self.written.label(new.name)
                self.healthy.add(new.name)
                yield
            elif kind == "promote" and learners:
                yield from self.change(list(promoted(self.members, learners[pick % len(learners)].id)))
            elif kind == "remove" and len(self.members) > 1:
                gone = (voters + learners)[pick % len(self.members)]
                yield from self.change(list(removed(self.members, gone.id)))
            elif kind == "restart":  # a member's pod made again (after a crash, an eviction)
                mem = self.members[pick % len(self.members)]
                self.labels[mem.name] = self.written.label(mem.name)
                self.healthy.add(mem.name)
                yield
            yield from self.apply(budget_for(self.members))  # the next read

    def evict(self, pick: int) -> None:
        """An eviction of a healthy pod, admitted or not by the budget's rule; if admitted,
        the voters left must hold a quorum."""
        if not self.healthy:
            return
        pod = sorted(self.healthy)[pick % len(self.healthy)]
        if self.labels.get(pod) == VOTER and not admitted(self.labels, self.healthy, self.min_available):
            return  # 429
        voters = {mem.name for mem in self.members if not mem.is_learner}
        before = len(self.healthy & voters)
        self.healthy.discard(pod)
        after = len(self.healthy & voters)
        assert after == before or after >= quorum(len(voters)), (
            f"evicting {pod} left {after} of {len(voters)} voters: labels {self.labels}, "
            f"minAvailable {self.min_available}, members {self.members}"
        )

    def drained(self) -> None:
        """The worst a drain can do from here: every unguarded voter evicted, then guarded
        ones while admitted (each checked by evict), on a copy."""
        world = copy.deepcopy(self)
        voters = {mem.name for mem in world.members if not mem.is_learner}
        for pod in sorted(world.healthy & voters, key=lambda pod: world.labels.get(pod) == VOTER):
            world.evict(sorted(world.healthy).index(pod))


STEPS = st.lists(
    st.tuples(st.sampled_from(["add", "promote", "remove", "restart"]), st.integers(0, 9)), max_size=8
)
# Each turn: the operator's next write (None) or an eviction attempt of the pod picked; the
# operator's writes stop for good at `dies_after` (it is down from there on).
TURNS = st.lists(st.one_of(st.none(), st.integers(0, 9)), max_size=60)


@given(
    voters=st.integers(1, 6),
    learners=st.integers(0, 2),
    steps=STEPS,
    turns=TURNS,
    dies_after=st.integers(0, 60),
)
def test_no_admitted_eviction_leaves_fewer_than_a_quorum_of_voters(
    voters: int, learners: int, steps: list[tuple[str, int]], turns: list[int | None], dies_after: int
) -> None:
    world = World(voters, learners)
    operator = world.operator(steps)
    writes_done = 0
    world.drained()
    for turn in turns:
        if turn is None:
            if writes_done < dies_after:
                next(operator, None)
                writes_done += 1
                world.drained()  # the operator may die right here: a drain finds this budget
        else:
            world.evict(turn)
    # Once the operator is down, every pod is tried in turn (a drain).
    for _ in range(len(world.healthy) + 1):
        world.evict(0)


@given(voters=st.integers(1, 6), learners=st.integers(0, 2), steps=STEPS)
def test_every_written_budget_is_safe_for_the_membership_it_is_written_under(
    voters: int, learners: int, steps: list[tuple[str, int]]
) -> None:
    world = World(voters, learners)
    for _ in world.operator(steps):
        live = VoterBudget(frozenset(p for p, v in world.labels.items() if v == VOTER), world.min_available)
        assert safe(live, world.members), (live, world.members)

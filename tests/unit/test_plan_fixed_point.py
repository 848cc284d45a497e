"""The planners drive an in-memory cluster (tests/unit/cluster_model.py) to a fixed point.

Rules break the cluster (kill a member, crash-loop it, hang it, wipe its data, change the size)
or take a few steps of the plan, so a break can land in the middle of a change. After every rule
the invariant runs `plan` -> apply the step on a copy of the cluster until the plan has no
action left, within a bound of steps, checking every promise of tests/unit/promises.py and that
no step applied to a cluster with a healthy quorum loses it. The fixed point is the spec: `size`
healthy voters and nothing else, whenever the voters that kept their data are a quorum; else the
plan waits and says quorum is lost (disaster recovery is Manual here).

Sizes go up to 5 (the worlds of test_plan_properties.py go to 9): each example runs the plan
to a fixed point after every rule, and five members exercise every quorum size that matters.
"""

import copy

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from actors.actions import Action, Wait
from actors.model import ClusterSpec, ProcessState
from actors.plan import plan
from tests.unit.cluster_model import ClusterModel
from tests.unit.promises import check_every_promise

MAX_SIZE = 5
# Enough for a cluster of MAX_SIZE to be rebuilt from one survivor member by member (remove,
# add, start, promote each), with room to spare; a plan that needs more is going round in circles.
STEP_BOUND = 60

members = st.integers(0, 2 * MAX_SIZE)  # an index into the members, taken modulo their number


class PlannedCluster(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster = ClusterModel()
        self.spec = ClusterSpec()

    @initialize(size=st.integers(1, MAX_SIZE))
    def create(self, size: int) -> None:
        self.spec = ClusterSpec(size=size)

    def _pick(self, index: int, running: bool = True) -> str | None:
        names = sorted(
            n for n, m in self.cluster.members.items() if not running or m.state is ProcessState.RUNNING
        )
        return names[index % len(names)] if names else None

    @rule(size=st.integers(1, MAX_SIZE))
    def resize(self, size: int) -> None:
        self.spec = ClusterSpec(size=size)

    @rule(index=members)
    def kill(self, index: int) -> None:
        name = self._pick(index)
        if name is not None:
            member = self.cluster.members[name]
            member.state, member.failures = ProcessState.EXITED, member.failures + 1

    @rule(index=members)
    def crash_loop(self, index: int) -> None:
        name = self._pick(index)
        if name is not None:
            member = self.cluster.members[name]
            member.state, member.failures = ProcessState.EXITED, 3

    @rule(index=members)
    def hang(self, index: int) -> None:
        name = self._pick(index)
        if name is not None:
            self.cluster.members[name].hung = True

    @rule(index=members)
    def wipe(self, index: int) -> None:
        name = self._pick(index, running=False)
        if name is not None:
            member = self.cluster.members[name]
            member.state, member.has_data = ProcessState.EXITED, False

    @rule(steps=st.integers(1, 3))
    def advance(self, steps: int) -> None:
        """A few steps of the plan, stopping short of the fixed point."""
        settle(self.spec, self.cluster, bound=steps)

    @invariant()
    def plan_reaches_the_spec(self) -> None:
        cluster = copy.deepcopy(self.cluster)
        could_recover = cluster.quorum_can_return() or not cluster.members  # or a new cluster
        last = settle(self.spec, cluster, bound=STEP_BOUND)
        assert not isinstance(last, Action), f"no fixed point within {STEP_BOUND} steps: still {last!r}"
        if could_recover:
            assert last is None, f"stopped at {last!r} with {cluster!r}"
            assert len(cluster.healthy_voters()) == self.spec.size, cluster
            assert len(cluster.members) == self.spec.size, cluster  # no learner, no leftover
        else:
            assert isinstance(last, Wait), cluster


def settle(spec: ClusterSpec, cluster: ClusterModel, bound: int) -> Action | Wait | None:
    """Plan and apply up to `bound` steps; the last step planned (not applied if not an Action)."""
    step = None
    for _ in range(bound):
        observed = cluster.observe()
        step = plan(spec, observed)
        check_every_promise(spec, observed, step)
        if not isinstance(step, Action):
            return step
        had_quorum = cluster.has_quorum()
        cluster.apply(step)
        assert cluster.has_quorum() or not had_quorum, f"{step!r} lost quorum: {cluster!r}"
    return step


PlannedCluster.TestCase.settings = settings(settings.default, max_examples=100, stateful_step_count=20)
test_planned_cluster = PlannedCluster.TestCase

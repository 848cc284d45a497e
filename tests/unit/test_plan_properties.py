"""Properties of `plan(spec, observed)` over random worlds (tests/unit/strategies.py): whatever
the members, their roles, health, learners and the spec's size, each step keeps the promises of
tests/unit/promises.py. Each test names the promise it checks; the promise's docstring says it.

The examples per test are few (the hypothesis profile in tests/conftest.py): the worlds are
cheap, and together with the stateful run to a fixed point the file stays within seconds.
"""

from hypothesis import given

from actors.model import ClusterSpec
from actors.observed import Observed
from actors.plan import plan
from tests.unit import promises
from tests.unit.strategies import observations, specs


@given(specs(), observations())
def test_no_step_costs_a_healthy_quorum(spec: ClusterSpec, observed: Observed) -> None:
    promises.no_step_costs_a_healthy_quorum(spec, observed, plan(spec, observed))


@given(specs(), observations())
def test_no_step_removes_the_last_healthy_voter(spec: ClusterSpec, observed: Observed) -> None:
    promises.never_removes_the_last_healthy_voter(spec, observed, plan(spec, observed))


@given(specs(), observations())
def test_membership_changes_one_at_a_time(spec: ClusterSpec, observed: Observed) -> None:
    promises.one_membership_change_at_a_time(spec, observed, plan(spec, observed))


@given(specs(), observations())
def test_leadership_moves_only_to_a_healthy_voter(spec: ClusterSpec, observed: Observed) -> None:
    promises.leadership_moves_to_a_healthy_voter(spec, observed, plan(spec, observed))


@given(specs(), observations())
def test_without_quorum_the_plan_only_repairs(spec: ClusterSpec, observed: Observed) -> None:
    promises.without_quorum_only_repair(spec, observed, plan(spec, observed))


@given(specs(), observations())
def test_converged_means_quorum_and_size(spec: ClusterSpec, observed: Observed) -> None:
    promises.converged_means_converged(spec, observed, plan(spec, observed))

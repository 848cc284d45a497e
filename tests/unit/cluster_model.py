"""A pure in-memory cluster the planners' steps are applied to: what a member runtime and etcd
would do with each step, reduced to the facts the planners read. The stateful property test
(test_plan_fixed_point.py) breaks it and runs `plan` on it to a fixed point.

Time is not modelled: a stopped member has been stopped, and a silent member silent, for longer
than any bound (crash backoff, unresponsiveAfter), so the planners act on them at once. A
restart cures a hung member. Nobody's data is lost unless a test says so. Disaster recovery is
Manual (the ClusterSpec default): a quorum lost for good stays lost, and the plan says so.
"""

from __future__ import annotations

import attrs

from actors.actions import (
    Action,
    AddLearner,
    DeleteRuntimeMember,
    MoveLeader,
    PromoteLearner,
    RemoveMember,
    RestartMember,
    StartMember,
    StartSeed,
)
from actors.model import EtcdMember, MemberHealth, ProcessState, RuntimeMember, member_ordinal
from actors.observed import Observed, quorum
from tests.unit.facts import C, urls

LONG = 10_000.0  # seconds: longer than every bound the planners apply


@attrs.define
class Member:
    ordinal: int
    voter: bool = True
    state: ProcessState = ProcessState.RUNNING
    has_data: bool = True
    hung: bool = False  # its process runs and answers nothing
    failures: int = 0  # exits in a row since it last ran

    @property
    def name(self) -> str:
        return f"demo-{self.ordinal}"

    @property
    def id(self) -> int:
        return 1000 + self.ordinal

    @property
    def healthy(self) -> bool:
        return self.state is ProcessState.RUNNING and not self.hung and self.has_data


@attrs.define
class ClusterModel:
    members: dict[str, Member] = attrs.field(factory=dict)
    leader: int | None = None
    had_members: bool = False
    # etcd's membership as the cluster actor holds it: listed again right after every step
    # (unknown if nobody answers then), kept between steps while members go silent, and listed
    # once someone answers while it is unknown.
    membership_known: bool = False

    # --- questions, answered without the planners' code ----------------------------------------

    def voters(self) -> list[Member]:
        return [m for m in self.members.values() if m.voter]

    def healthy_voters(self) -> list[Member]:
        return [m for m in self.voters() if m.healthy]

    def has_quorum(self) -> bool:
        voters = self.voters()
        return bool(voters) and len(self.healthy_voters()) >= quorum(len(voters))

    def quorum_can_return(self) -> bool:
        """The voters that still have data are a quorum: restarts alone bring quorum back."""
        voters = self.voters()
        return bool(voters) and len([m for m in voters if m.has_data]) >= quorum(len(voters))

    # --- what the cluster actor would observe ---------------------------------------------------

    def _elect(self) -> None:
        if self.leader in {m.id for m in self.healthy_voters()}:
            return
        self.leader = min(m.id for m in self.healthy_voters()) if self.has_quorum() else None

    def observe(self) -> Observed:
        self._elect()
        answering = [m for m in self.members.values() if m.healthy]
        self.membership_known = self.membership_known or bool(answering)
        health = {
            m.name: MemberHealth(m.id, self.leader or 0, 100, 100, not m.voter, 4096) for m in answering
        }
        runtime = tuple(
            RuntimeMember(m.name, urls(m.ordinal), m.state, m.has_data, consecutive_failures=m.failures)
            for m in self.members.values()
        )
        etcd = tuple(
            EtcdMember(m.id, m.name, (urls(m.ordinal).peer_url,), (urls(m.ordinal).client_url,), not m.voter)
            for m in self.members.values()
        )
        stopped = {m.name for m in self.members.values() if m.state is not ProcessState.RUNNING}
        silent = {m.name for m in self.members.values() if m.state is ProcessState.RUNNING and not m.healthy}
        return Observed(
            C,
            runtime,
            etcd if self.membership_known else None,
            health,
            silent_for=dict.fromkeys(silent, LONG),
            stopped_for=dict.fromkeys(stopped, LONG),
            had_members=self.had_members,
        )

    # --- what a step does -------------------------------------------------------------------------

    def apply(self, step: Action) -> None:
        match step:
            case StartSeed(name=name) | AddLearner(name=name):
                ordinal = member_ordinal(C, name)
                assert ordinal is not None and name not in self.members
                self.members[name] = Member(ordinal, voter=isinstance(step, StartSeed))
                self.had_members = True
            case StartMember(name=name) | RestartMember(name=name):
                self.members[name] = attrs.evolve(
                    self.members[name], state=ProcessState.RUNNING, hung=False, failures=0
                )
            case PromoteLearner(name=name):
                self.members[name].voter = True
            case RemoveMember(member_id=member_id):
                self.members = {n: m for n, m in self.members.items() if m.id != member_id}
            case DeleteRuntimeMember(name=name):
                del self.members[name]
            case MoveLeader(to_id=to_id):
                self.leader = to_id
            case _:
                raise AssertionError(f"the model does not know {step!r}")
        self._elect()
        self.membership_known = any(m.healthy for m in self.members.values())

"""Every action class joins Action.kinds by being defined: the metrics need no list of them."""

from typing import ClassVar

import attrs
import pytest

import actors.plan  # noqa: F401  every planner's actions, defined
from actors.actions import Action, ActionContext, MoveLeader, Outcome
from actors.maintenance.steps import DefragMember, MoveLeaderToDefrag
from actors.recovery import RecoverFromBackup, RecoverFromSurvivor


def test_every_action_is_known_by_its_name() -> None:
    for cls in (MoveLeader, MoveLeaderToDefrag, DefragMember, RecoverFromSurvivor, RecoverFromBackup):
        assert Action.kinds[cls.__name__] is cls  # the slotted class attrs made, not its draft


def test_a_second_action_of_the_same_name_is_refused() -> None:
    with pytest.raises(TypeError, match="two actions are named MoveLeader"):

        @attrs.frozen
        class MoveLeader(Action):  # the clash is the point
            event_reason: ClassVar[str] = "Clash"

            async def execute(self, ctx: ActionContext) -> Outcome:
                return self.done()

            def describe(self) -> str:
                return "clash"

            def progress(self) -> str:
                return "clashing"

    assert Action.kinds["MoveLeader"].event_reason == "LeaderMoved"


def test_the_common_outcome_is_what_describe_says() -> None:
    step = MoveLeader("demo-1", 2, "handing over")
    assert step.done() == Outcome("moved leadership to demo-1: handing over")

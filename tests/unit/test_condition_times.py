"""A condition's lastTransitionTime is a real time wherever the status comes from: a condition
that reaches a status writer without a time is stamped when written, never shown as the epoch."""

import json

import attrs

from actors.assess import stamp_unset
from actors.model import ClusterRef, ClusterStatus, Condition
from supervisor.local.status_files import StatusFiles

REF = ClusterRef("default", "gamma")
WRITTEN_AT = 1_780_000_000.0  # 2026-05-28T20:26:40Z


def test_only_conditions_without_a_time_are_stamped():
    kept = Condition("Available", "True", "QuorumHealthy", "", 1_700_000_000.0)
    unset = Condition("Degraded", "True", "InvalidSpec", "spec.size: ...")
    stamped = attrs.evolve(unset, last_transition_time=WRITTEN_AT)
    assert stamp_unset((kept, unset), WRITTEN_AT) == (kept, stamped)


async def test_a_condition_written_without_a_time_shows_when_not_the_epoch(tmp_path):
    files = StatusFiles(tmp_path, now=lambda: WRITTEN_AT)
    unset = Condition("Degraded", "True", "InvalidSpec", "spec.size: must be between 1 and 9 (got 0)")
    await files.publish(REF, ClusterStatus(conditions=(unset,), message="not created: spec.size: ..."))
    written = json.loads(files.path(REF).read_text())
    assert [c["lastTransitionTime"] for c in written["conditions"]] == ["2026-05-28T20:26:40Z"]

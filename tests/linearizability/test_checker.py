"""The checker itself, on histories written by hand: it must be able to say no.

Times are nanoseconds; each history is the smallest that shows one rule.
"""

from __future__ import annotations

from pathlib import Path

from tests.harness.history import (
    FAILED,
    GET,
    OK,
    PUT,
    UNKNOWN,
    CheckResult,
    History,
    Operation,
    check_history,
)


def history(*ops: tuple[int, str, str | None, int, int, str]) -> History:
    """(client, kind, value, call, return, outcome) on the one key "k"."""
    recorded = History()
    for client, kind, value, call, returned, outcome in ops:
        recorded.record(Operation(client, kind, "k", value, call, returned, outcome))
    return recorded


def check(recorded: History, tmp_path: Path) -> CheckResult:
    result = check_history(recorded, tmp_path)
    print(result.report)
    return result


def test_a_stale_read_is_not_linearizable(tmp_path: Path) -> None:
    result = check(
        history(
            (0, PUT, "1", 0, 10, OK),
            (0, PUT, "2", 20, 30, OK),
            (1, GET, "1", 40, 50, OK),  # "2" was acknowledged before this read began
        ),
        tmp_path,
    )
    assert not result.ok and result.operations == 3
    assert "NOT linearizable" in result.report
    assert result.visualization is not None and result.visualization.stat().st_size > 0


def test_reading_a_value_before_it_is_written_is_not_linearizable(tmp_path: Path) -> None:
    result = check(history((1, GET, "x", 0, 10, OK), (0, PUT, "x", 20, 30, OK)), tmp_path)
    assert not result.ok


def test_a_put_of_unknown_outcome_may_apply_at_any_later_time(tmp_path: Path) -> None:
    # The client gave up on "2" at 25; it was applied later, between the two reads.
    result = check(
        history(
            (0, PUT, "1", 0, 10, OK),
            (0, PUT, "2", 20, 25, UNKNOWN),
            (1, GET, "1", 30, 40, OK),
            (1, GET, "2", 50, 60, OK),
            (1, GET, "2", 70, 80, OK),
        ),
        tmp_path,
    )
    assert result.ok and result.operations == 5
    assert result.visualization is None


def test_but_a_put_of_unknown_outcome_applies_at_most_once(tmp_path: Path) -> None:
    result = check(
        history(
            (0, PUT, "1", 0, 10, UNKNOWN),
            (1, PUT, "2", 20, 30, OK),
            (2, GET, "1", 40, 50, OK),
            (2, GET, "2", 60, 70, OK),
            (2, GET, "1", 80, 90, OK),  # "1" again: only a second application could explain it
        ),
        tmp_path,
    )
    assert not result.ok


def test_keys_are_independent_and_absent_at_first(tmp_path: Path) -> None:
    recorded = History()
    recorded.record(Operation(0, PUT, "a", "1", 0, 10, OK))
    recorded.record(Operation(1, GET, "b", None, 20, 30, OK))
    recorded.record(Operation(1, GET, "a", "1", 40, 50, OK))
    recorded.record(Operation(2, GET, "a", None, 60, 70, FAILED))  # observed nothing: dropped
    result = check(recorded, tmp_path)
    assert result.ok and result.operations == 3

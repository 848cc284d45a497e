"""alongside(): the status write beside a step. A failed write must not cut the step short."""

import pytest
import trio

from actors.cluster import alongside


async def test_both_run_at_once_and_the_main_result_comes_back(autojump_clock):
    async def side():
        await trio.sleep(1)

    async def main():
        await trio.sleep(1)
        return "done"

    start = trio.current_time()
    assert await alongside(side, main) == "done"
    assert trio.current_time() - start == pytest.approx(1)


async def test_a_failing_side_is_raised_only_once_main_has_finished(autojump_clock):
    finished = []

    async def side():
        raise ValueError("status not written")

    async def main():
        await trio.sleep(2)
        finished.append(trio.current_time())

    with pytest.raises(ValueError, match="status not written"):
        await alongside(side, main)
    assert finished, "the step was cut short"


async def test_a_failing_main_is_raised_as_it_is_and_stops_the_side(autojump_clock):
    side_ended = []

    async def side():
        await trio.sleep(10)
        side_ended.append(True)

    async def main():
        await trio.sleep(1)
        raise KeyError("step failed")

    with pytest.raises(KeyError):  # not an exception group: callers catch the error itself
        await alongside(side, main)
    assert not side_ended

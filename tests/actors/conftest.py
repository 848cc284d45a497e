"""The actor tests run on trio's autojump clock: virtual time jumps ahead whenever every task waits."""

import pytest
import trio.testing


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)

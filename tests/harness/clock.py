"""A wall clock for the backup actor that runs fast, so cron minutes pass in seconds."""

import time

# One cron minute passes every two real seconds.
SPEED = 30.0


def fast_clock():
    start = time.time()
    # Start two (real) seconds before a minute boundary, so the first slot comes at once.
    offset = 60 - (start % 60) - 2 * SPEED
    return lambda: start + offset + (time.time() - start) * SPEED


class SteppedClock:
    """A wall clock for the backup actors that stands still in the middle of a minute until
    `next_minute()`: each step lets exactly one scheduled slot ("* * * * *") come."""

    def __init__(self) -> None:
        self.now = time.time() // 60 * 60 + 30

    def __call__(self) -> float:
        return self.now

    def next_minute(self) -> None:
        self.now += 60

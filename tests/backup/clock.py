"""A wall clock for the backup actor that runs fast, so cron minutes pass in seconds."""

import time

# One cron minute passes every two real seconds.
SPEED = 30.0


def fast_clock():
    start = time.time()
    # Start two (real) seconds before a minute boundary, so the first slot comes at once.
    offset = 60 - (start % 60) - 2 * SPEED
    return lambda: start + offset + (time.time() - start) * SPEED

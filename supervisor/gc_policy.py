"""Garbage-collector settings for a daemon that holds many long-lived actors.

CPython's default thresholds (700, 10, 10) run a full collection often, and a full collection
walks every object: with a thousand clusters' actors, supervisors and mailboxes alive, each one
stalls the event loop for hundreds of milliseconds (bench/bench_fleet.py: health ticks late by
~0.5 s at p99). Most of what the daemon allocates per tick is short-lived and freed by
reference counting; cycles are rare. Collecting the young generation less often and the old one
much less often keeps ticks on time for the same memory.
"""

from __future__ import annotations

import gc

YOUNG = 100_000  # allocations before a young collection (default 700)
MIDDLE = 50  # young collections before a middle one (default 10)
OLD = 1_000  # middle collections before a full one (default 10)


def tune_for_many_actors() -> None:
    gc.set_threshold(YOUNG, MIDDLE, OLD)

"""Numbers an operation measured, handed to the event sink beside its Event, as data.

An Event's message is for people; what the metrics count (the bytes a defragmentation gave
back, how long a backup took, how its verification ended) travels in one of these records and
is never parsed back out of the text. Sinks that only write Events ignore it. Pure values.
"""

from __future__ import annotations

import enum

from attrs import frozen


class Verification(enum.Enum):
    """How a backup's verification ended (spec.backup.verify)."""

    PASSED = "passed"  # the stored snapshot restored, and its HashKV equals the source member's
    FAILED = "failed"  # it did not restore, or the restored data differs from the source's
    INCONCLUSIVE = "inconclusive"  # nothing to compare with: the source compacted or went away


@frozen
class Defragmented:
    reclaimed_bytes: int  # file size before minus after (writes meanwhile can make it negative)
    seconds: float


@frozen
class BackupMeasured:
    seconds: float | None = None  # start to stored (and verified); None for a backup not taken
    verification: Verification | None = None  # None: not asked for, or not reached


Measurement = Defragmented | BackupMeasured

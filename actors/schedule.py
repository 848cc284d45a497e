"""When a scheduled operation (a backup, a defragmentation) is due: 5-field cron, in UTC,
read with croniter.

A firing missed while the daemon was down is made up once at start, not once per missed slot:
what matters is that the operation ran for the latest slot, not how many slots went by.
"""

from __future__ import annotations

from datetime import UTC, datetime

from croniter import croniter


def valid_schedule(schedule: str) -> bool:
    # croniter also takes 6- and 7-field forms; the resource API says 5-field cron.
    return len(schedule.split()) == 5 and bool(croniter.is_valid(schedule))


def latest_slot(schedule: str, now: datetime) -> datetime:
    """The most recent firing at or before `now`."""
    if croniter.match(schedule, now):
        return now.replace(second=0, microsecond=0)
    return croniter(schedule, now).get_prev(datetime)


def next_slot(schedule: str, now: datetime) -> datetime:
    """The first firing strictly after `now`."""
    return croniter(schedule, now).get_next(datetime)


def due(schedule: str, since: datetime, now: datetime) -> bool:
    """Whether a scheduled operation should start now: a slot came after `since` (the last
    scheduled run's start, or when the schedule was first seen), however many slots since."""
    return latest_slot(schedule, now) > since


def utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)

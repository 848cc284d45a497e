"""The BackupHealthy condition: are there recent verified backups, and do they keep working?"""

from __future__ import annotations

from attrs import frozen

from actors.errors import BackupEncodingError
from actors.model import BackupSpec, BackupStatus, Condition
from actors.schedule import next_slot, utc

KIND = "BackupHealthy"

# Consecutive failed backups before the condition turns False (each is retried with backoff).
FAILURES_BEFORE_UNHEALTHY = 3


@frozen
class BackupReport:
    """What the backup actor reports: the status fields, and the last failure in words;
    `last_reason` names it when no retry can mend it (encoding_problem). `second_site`: why the
    last copy to spec.backup.copyTo failed, naming that store ("" when it worked); `held`:
    backups retention kept because they are locked ("" when none)."""

    status: BackupStatus
    last_error: str = ""
    last_reason: str = ""
    second_site: str = ""
    held: str = ""


def encoding_problem(exc: BaseException) -> str:
    """The name of the key or decryption problem behind a failed backup (BackupKeyMissing,
    BackupKeyInvalid, BackupDecryptFailed, BackupCorrupt: actors/errors.py), else ""."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, BackupEncodingError):
            return at.reason
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return ""


def schedule_interval(schedule: str, now: float) -> float:
    """Seconds between the next two firings (a cron schedule's period, near `now`)."""
    first = next_slot(schedule, utc(now))
    return (next_slot(schedule, first) - first).total_seconds()


def backup_condition(spec: BackupSpec, report: BackupReport | None, now: float) -> Condition:
    status = report.status if report else BackupStatus()
    failures = status.consecutive_failures
    if failures and report and report.last_reason:
        # A key that is missing or wrong stays so until someone acts: say so at once, by name.
        return Condition(KIND, "False", report.last_reason, f"the last backup failed: {report.last_error}")
    if failures >= FAILURES_BEFORE_UNHEALTHY:
        error = report.last_error if report else ""
        return Condition(KIND, "False", "BackupsFailing", f"{failures} backups failed in a row: {error}")
    last = status.last_successful_backup
    if last is None:
        return Condition(KIND, "Unknown", "NoBackupYet", "no backup taken yet")
    if spec.schedule is not None:
        limit = 2 * schedule_interval(spec.schedule, now)
        age = now - last.completion_time
        if age > limit:
            return Condition(
                KIND, "False", "BackupTooOld",
                f"the newest backup {last.key} is {age / 3600:.1f}h old, over twice the schedule's interval",
            )  # fmt: skip
    if not last.verified and spec.verify:
        return Condition(KIND, "False", "NotVerified", f"the newest backup {last.key} is not verified")
    if report and report.second_site:
        # The backups themselves are fine (the status says so); the second copy is not there.
        return Condition(
            KIND, "False", "SecondSiteFailing",
            f"newest backup {last.key}, but copying to the second store failed: {report.second_site}",
        )  # fmt: skip
    note = f"; the last attempt failed: {report.last_error}" if failures and report else ""
    held = f"; {report.held}" if report and report.held else ""
    return Condition(KIND, "True", "BackupsCurrent", f"newest backup {last.key}{note}{held}")

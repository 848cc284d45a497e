"""When backups are due and which ones retention deletes (pure rules, exact times)."""

from datetime import UTC, datetime, timedelta

import attrs
import pytest

from actors.backup.health import BackupReport, backup_condition
from actors.backup.locks import held_note, lock_days, split_locked
from actors.backup.retention import BackupRecord, expired
from actors.cluster_context import ServiceReports
from actors.errors import StoreError
from actors.model import BackupSpec, BackupStatus, ImmutableSpec, LastBackup, LocalStore, S3Store, StoreSpec
from actors.schedule import due, latest_slot, next_slot, valid_schedule

EVERY_SIX_HOURS = "0 */6 * * *"


def at(hour: int, minute: int = 0, day: int = 1) -> datetime:
    return datetime(2026, 1, day, hour, minute, tzinfo=UTC)


def test_schedules_are_five_field_cron():
    assert valid_schedule(EVERY_SIX_HOURS) and valid_schedule("*/5 * * * *")
    assert not valid_schedule("0 */6 * * * *") and not valid_schedule("every day") and not valid_schedule("")


def test_slots_in_utc():
    assert latest_slot(EVERY_SIX_HOURS, at(7, 30)) == at(6)
    assert latest_slot(EVERY_SIX_HOURS, at(6)) == at(6)
    assert next_slot(EVERY_SIX_HOURS, at(6)) == at(12)


def test_due_once_per_slot_and_missed_slots_make_up_once():
    assert not due(EVERY_SIX_HOURS, since=at(6, 0), now=at(11, 59))
    assert due(EVERY_SIX_HOURS, since=at(6, 0), now=at(12, 0))
    # Down from 01:00 to 20:00: three slots missed, one backup at start, then none until 00:00.
    assert due(EVERY_SIX_HOURS, since=at(1), now=at(20))
    assert not due(EVERY_SIX_HOURS, since=at(20), now=at(23, 59))
    assert due(EVERY_SIX_HOURS, since=at(20), now=at(0, 0, day=2))


def records(*specs):
    base = at(0).timestamp()
    return [BackupRecord(f"b{i}", base + hours * 3600, verified) for i, (hours, verified) in enumerate(specs)]


def test_retention_keeps_the_newest_and_the_young():
    backups = records((1, True), (2, True), (3, True), (4, True))
    now = at(5).timestamp()
    assert [b.key for b in expired(backups, keep=2, max_age=None, now=now)] == ["b0", "b1"]
    assert [b.key for b in expired(backups, keep=None, max_age=2.5 * 3600, now=now)] == ["b0", "b1"]
    assert expired(backups, keep=None, max_age=None, now=now) == []


def test_the_newest_verified_backup_is_never_deleted():
    backups = records((1, True), (2, False), (3, False))
    now = at(5).timestamp() + timedelta(days=30).total_seconds()
    # Everything is too old and over the count, but b0 is the only verified one: it stays.
    assert [b.key for b in expired(backups, keep=1, max_age=3600, now=now)] == ["b1", "b2"]


def condition(report, *, schedule=EVERY_SIX_HOURS, verify=True, now=None):
    now = now or at(12)
    spec = BackupSpec(schedule=schedule, verify=verify, store=StoreSpec(local=LocalStore("/b")))
    return backup_condition(spec, report, now.timestamp())


def report(failures=0, *, completed=None, verified=True, error=""):
    last = None if completed is None else LastBackup("k.db", 9, 100, verified, completed.timestamp())
    return BackupReport(BackupStatus(None, last, failures), error)


def test_backup_health_from_failures_age_and_verification():
    assert (condition(None).status, condition(None).reason) == ("Unknown", "NoBackupYet")
    assert condition(report(completed=at(6))).reason == "BackupsCurrent"
    failing = condition(report(3, completed=at(6), error="bucket gone"))
    assert (failing.status, failing.reason) == (
        "False",
        "BackupsFailing",
    ) and "bucket gone" in failing.message
    # Every six hours: a newest backup older than twelve hours is too old.
    assert condition(report(completed=at(12, 30)), now=at(23, 59)).status == "True"
    assert condition(report(completed=at(12, 30)), now=at(0, 31, day=2)).reason == "BackupTooOld"
    assert condition(report(completed=at(6), verified=False)).reason == "NotVerified"
    assert condition(report(completed=at(6), verified=False), verify=False).status == "True"


def test_locked_backups_are_kept_past_retention_until_their_date():
    now = at(5).timestamp()
    doomed = [
        BackupRecord("b0", at(1).timestamp(), True, locked_until=now - 1),  # the lock has run out
        BackupRecord("b1", at(2).timestamp(), True, locked_until=now + 3600),
        BackupRecord("b2", at(3).timestamp(), True, locked_until=now + 7200),
        BackupRecord("b3", at(4).timestamp(), True),  # never locked
    ]
    deletable, kept = split_locked(doomed, now)
    assert [b.key for b in deletable] == ["b0", "b3"] and [b.key for b in kept] == ["b1", "b2"]
    until = datetime.fromtimestamp(now + 7200, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (
        held_note(kept, "s3 bucket 'x'")
        == f"2 backups kept past retention in s3 bucket 'x': locked until {until}"
    )
    assert held_note([], "s3 bucket 'x'") == ""


def test_a_failing_second_site_turns_backup_health_false_by_name_and_held_backups_are_told():
    ok = report(completed=at(6))
    second = attrs.evolve(ok, second_site="the second store s3 bucket 'dr': refused the credentials")
    failing = condition(second)
    assert (failing.status, failing.reason) == ("False", "SecondSiteFailing")
    assert "s3 bucket 'dr'" in failing.message and "k.db" in failing.message
    # The first store failing says so first: that is what needs mending.
    assert condition(
        attrs.evolve(second, status=BackupStatus(None, ok.status.last_successful_backup, 3))
    ).reason == ("BackupsFailing")
    held = condition(attrs.evolve(ok, held="2 backups kept past retention in s3 bucket 'x': locked until T"))
    assert held.status == "True" and held.message.endswith(
        "2 backups kept past retention in s3 bucket 'x': locked until T"
    )


def test_a_failing_copy_of_delta_chunks_is_a_failing_second_site_while_backups_stay_current():
    reports = ServiceReports()
    reports.backup = report(completed=at(6))
    assert condition(reports.backup_report()).reason == "BackupsCurrent"
    reports.deltas_second_site = "delta chunks to the second store s3 bucket 'dr': no such bucket"
    failing = condition(reports.backup_report())
    assert (failing.status, failing.reason) == ("False", "SecondSiteFailing")
    assert "delta chunks" in failing.message and "s3 bucket 'dr'" in failing.message
    # Both the snapshots' copy and the chunks' failing: both named.
    reports.backup = attrs.evolve(reports.backup, second_site="the second store s3 bucket 'dr': refused")
    assert "refused" in condition(reports.backup_report()).message
    assert "delta chunks" in condition(reports.backup_report()).message
    reports.deltas_second_site = ""  # caught up
    assert reports.backup_report() is reports.backup


def test_immutable_needs_a_store_that_locks():
    with pytest.raises(StoreError, match=r"spec.backup.immutable: local directory /b cannot lock objects"):
        lock_days(StoreSpec(local=LocalStore("/b")), BackupSpec(immutable=ImmutableSpec(3)))
    s3 = StoreSpec(s3=S3Store("b"))
    assert lock_days(s3, BackupSpec(immutable=ImmutableSpec(3))) == 3
    assert lock_days(s3, BackupSpec()) is None and lock_days(s3, None) is None

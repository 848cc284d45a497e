"""Immutable backups (spec.backup.immutable): which stores lock what they are given, and which
backups retention must leave alone because they are locked (pure).

A locked object cannot be deleted before its date; on a versioned S3 bucket (object lock
needs versioning) a plain delete still "succeeds" by hiding the object behind a delete marker,
so retention must not even try: it reads the date each backup's metadata recorded
(`retainUntil`) and keeps the backup until then, saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from actors.backup.retention import BackupRecord
from actors.errors import StoreError
from actors.model import BackupSpec, StoreSpec


def lock_days(store: StoreSpec, backup: BackupSpec | None) -> int | None:
    """How long `store` locks what backups write to it: spec.backup.immutable's days for an s3
    store; None without immutable. Any other kind cannot lock (the codec refuses it for
    spec.backup.store and copyTo): an EtcdBackup naming one fails rather than stores an
    unlocked backup."""
    if backup is None or backup.immutable is None:
        return None
    if store.s3 is None:
        raise StoreError(
            f"spec.backup.immutable: {store.describe()} cannot lock objects (only s3 object lock can),"
            " so no backup is written there"
        )
    return backup.immutable.days


def split_locked(doomed: Sequence[BackupRecord], now: float) -> tuple[list[BackupRecord], list[BackupRecord]]:
    """What retention chose, as (to delete now, kept because locked past `now`)."""
    kept = [b for b in doomed if b.locked_until is not None and b.locked_until > now]
    return [b for b in doomed if b not in kept], kept


def held_note(kept: Sequence[BackupRecord], where: str) -> str:
    """ "" when nothing is held; else how many and until when (the latest date)."""
    if not kept:
        return ""
    until = max(b.locked_until or 0.0 for b in kept)
    stamp = datetime.fromtimestamp(until, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{len(kept)} backups kept past retention in {where}: locked until {stamp}"

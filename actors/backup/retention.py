"""Which backups retention deletes: more than `keep`, or older than `max_age` — both apply —
but never the newest verified backup, whatever the rules say (it is the one a restore needs).
Locked backups among them are kept until their date: locks.split_locked.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import frozen


@frozen
class BackupRecord:
    key: str
    taken_at: float  # unix seconds
    verified: bool
    # Until when the store locks it (its metadata's retainUntil); None: not locked.
    locked_until: float | None = None


def expired(
    backups: Sequence[BackupRecord], *, keep: int | None, max_age: float | None, now: float
) -> list[BackupRecord]:
    """The backups to delete, oldest first."""
    newest_first = sorted(backups, key=lambda b: b.taken_at, reverse=True)
    protected = next((b for b in newest_first if b.verified), None)
    doomed = []
    for position, backup in enumerate(newest_first):
        too_many = keep is not None and position >= keep
        too_old = max_age is not None and now - backup.taken_at > max_age
        if (too_many or too_old) and backup is not protected:
            doomed.append(backup)
    return sorted(doomed, key=lambda b: b.taken_at)

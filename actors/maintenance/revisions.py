"""Which store revision the cluster had a while ago: what a periodic autoCompaction keeps.

etcd's periodic compactor keeps `retention` worth of history by remembering the revision it
saw at intervals of a tenth of the retention; a NOSPACE recovery keeps the same window on its
first try (actors/plan/maintenance.py), so the cluster actor samples the revisions its probes
report the same way. Bounded: about a dozen samples whatever the retention. Pure.
"""

from __future__ import annotations

from attrs import frozen

from actors.model import CompactionMode, MaintenanceSpec, duration_seconds

# A sample every tenth of the retention, as etcd's own periodic compactor does: the revision
# chosen is then at most a tenth of the retention older than it needs to be (more history kept).
SAMPLES_PER_WINDOW = 10


def periodic_retention_seconds(maintenance: MaintenanceSpec) -> float | None:
    """The periodic autoCompaction's retention in seconds; None for none, or mode revision."""
    compaction = maintenance.auto_compaction
    if compaction is None or compaction.mode is not CompactionMode.PERIODIC:
        return None
    return duration_seconds(compaction.retention)


@frozen
class RevisionSamples:
    """(time, revision) samples, oldest first, for one retention window."""

    samples: tuple[tuple[float, int], ...] = ()

    def record(self, at: float, revision: int, window: float | None) -> RevisionSamples:
        """The samples once `revision` was seen at `at`; none kept without a window."""
        if window is None or window <= 0:
            return RevisionSamples()
        samples = self.samples
        if samples and at - samples[-1][0] < window / SAMPLES_PER_WINDOW:
            return self  # recent enough: the next sample comes a tenth of the window later
        revision = max(revision, samples[-1][1]) if samples else revision  # a lagging member
        samples = (*samples, (at, revision))
        # The newest sample at least a window old answers every question; older ones never do.
        old_enough = [i for i, (t, _) in enumerate(samples) if at - t >= window]
        return RevisionSamples(samples[old_enough[-1] :] if old_enough else samples)

    def ages(self, now: float) -> tuple[tuple[float, int], ...]:
        """(seconds ago, revision) of each sample, oldest first: what `Observed` carries."""
        return tuple((now - t, revision) for t, revision in self.samples)


def revision_at_least(ages: tuple[tuple[float, int], ...], seconds: float) -> int | None:
    """The newest revision sampled at least `seconds` ago (None: no sample is that old)."""
    old = [revision for age, revision in ages if age >= seconds]
    return max(old) if old else None

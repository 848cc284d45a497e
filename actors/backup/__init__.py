"""Backups: when they are due (schedule.py), which ones retention deletes (retention.py), whether
they are healthy (health.py), where one is taken from and what it is called (source.py), how one
is taken and verified (job.py), and the per-cluster actor that runs them (actor.py)."""

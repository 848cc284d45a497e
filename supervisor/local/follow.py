"""Following the manifest file: each read applied to the fleet, and no read it cannot trust
ever tears a cluster down.

- A file that cannot be used (unreadable, not YAML, empty) changes nothing: every cluster keeps
  its last good spec and reports why in its status; the board shows the file's problem.
- Valid documents apply at once; an invalid one keeps its running cluster on the last good spec.
- An invalid document of a cluster that does not run yet gets a status (not created: the field
  and the rule) until it becomes valid (then the cluster is created) or leaves the file (then
  its status goes).
- EtcdBackup documents go to the on-demand backups (backup_requests.py); an invalid one is
  reported and holds nothing back.
- A running cluster the file lacks is removed only when a second complete read, at least
  `confirm_after` later, still lacks it (clusters_file.Removals).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Protocol

import trio

from actors.assess import not_created_status
from actors.cluster_context import Desired
from actors.fleet import Fleet
from actors.model import ClusterRef
from actors.pod_template import kubernetes_only
from actors.ports import EventSink, StatusSink
from supervisor.local.backup_requests import LocalBackupRequests
from supervisor.local.clusters_file import FileProblem, Manifest, Removals, read_clusters
from supervisor.local.env import as_typed
from supervisor.local.manifest import Unreadable, read_settled

log = logging.getLogger(__name__)

# Long enough for an editor to finish a save (truncate, then write), short enough to feel prompt.
CONFIRM_REMOVAL_AFTER = 2.0


class FollowSinks(StatusSink, EventSink, Protocol):
    def forget(self, cluster: ClusterRef) -> None:
        """The cluster is gone: its status too."""

    def show_file_problems(self, problems: list[str]) -> None:
        """What is wrong with the file as a whole, for the board (empty: nothing)."""


class ManifestFollower:
    def __init__(
        self,
        file: Path,
        fleet: Fleet,
        sinks: FollowSinks,
        *,
        confirm_after: float = CONFIRM_REMOVAL_AFTER,
        backups: LocalBackupRequests | None = None,
    ) -> None:
        self._file = file
        self._backups = backups
        self._shown = as_typed(file)  # in messages
        self._fleet = fleet
        self._sinks = sinks
        self._removals = Removals(confirm_after)
        self._not_created: dict[ClusterRef, str] = {}  # invalid new clusters, with their published problem
        self._ignored: dict[ClusterRef, tuple[str, ...]] = {}  # Kubernetes-only fields, as last logged

    async def run(self, receive: trio.MemoryReceiveChannel[str | Unreadable]) -> None:
        """Apply every read the watcher sends, and the confirming reads that removals wait for."""
        while True:
            due = self._removals.next_check()
            with trio.move_on_at(due if due is not None else float("inf")) as timer:
                try:
                    read = await receive.receive()
                except trio.EndOfChannel:
                    return
            if timer.cancelled_caught:
                settled = await read_settled(self._file)  # the second look, from the disk itself
                if settled is None:
                    continue  # being written: look again, or take what the watch sends
                read = settled
            await self.apply(read)

    async def apply(self, read: str | Unreadable) -> None:
        manifest = read_clusters(read)
        if isinstance(manifest, FileProblem):
            await self._hold_everything(f"cannot use {self._shown}: {manifest.reason}")
        else:
            await self._apply(manifest)

    async def _hold_everything(self, problem: str) -> None:
        log.error("%s; every cluster keeps its last good spec", problem, extra={"event": "manifest"})
        self._removals.hold()
        self._sinks.show_file_problems([f"{problem}; every cluster keeps its last good spec"])
        for ref in self._fleet.refs():
            await self._fleet.report_problem(ref, problem)

    async def _apply(self, manifest: Manifest) -> None:
        unnamed = [f"cannot use {self._shown}: {problem}" for problem in manifest.unnamed]
        for problem in manifest.invalid_backups:
            log.error("invalid %s", problem, extra={"event": "invalid-spec"})
        self._sinks.show_file_problems(unnamed + [f"invalid {p}" for p in manifest.invalid_backups])
        if self._backups is not None:
            await self._backups.update(manifest.backups, manifest.resources, manifest.names())
        for resource in manifest.resources:
            self._not_created.pop(resource.ref, None)  # the cluster actor publishes from now on
            self._log_ignored(resource.ref, kubernetes_only(resource.spec))
            await self._fleet.upsert(Desired(resource))
        for ref, problem in sorted(manifest.invalid.items()):
            log.error("invalid EtcdCluster %s: %s", ref, problem, extra={"event": "invalid-spec"})
            if not await self._fleet.report_problem(ref, problem):
                await self._report_not_created(ref, problem)
        for ref in sorted(set(self._not_created) - manifest.names()):
            del self._not_created[ref]
            self._sinks.forget(ref)
        await self._remove_lacking(manifest, unnamed)

    def _log_ignored(self, ref: ClusterRef, ignored: tuple[str, ...]) -> None:
        """Once per change: the fields set that apply on Kubernetes only (the status says it too:
        the condition SpecIgnored)."""
        if self._ignored.get(ref, ()) == ignored:
            return
        self._ignored[ref] = ignored
        if ignored:
            log.warning(
                "%s: %s applies on Kubernetes only: accepted and ignored by the local runtime",
                ref,
                ", ".join(ignored),
                extra={"event": "spec-ignored", "cluster": str(ref)},
            )

    async def _remove_lacking(self, manifest: Manifest, unnamed: list[str]) -> None:
        lacking = set(self._fleet.refs()) - manifest.names()
        if unnamed:
            # A document that names no cluster may be the very one this read lacks.
            self._removals.hold()
            for ref in sorted(lacking):
                await self._fleet.report_problem(ref, unnamed[0])
            return
        due = self._removals.due(lacking, trio.current_time())
        for ref in sorted(lacking - due):
            log.info(
                "%s is not in %s: removed if a read %.0f s later still lacks it",
                ref,
                self._shown,
                self._removals.confirm_after,
                extra={"event": "manifest", "cluster": str(ref)},
            )
        for ref in sorted(due):
            await self._fleet.remove(ref)
            self._sinks.forget(ref)

    async def _report_not_created(self, ref: ClusterRef, problem: str) -> None:
        if self._not_created.get(ref) == problem:
            return
        self._not_created[ref] = problem
        await self._sinks.record(ref, reason="InvalidSpec", message=problem, warning=True)
        await self._sinks.publish(ref, not_created_status(problem, now=time.time()))

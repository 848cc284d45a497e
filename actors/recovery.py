"""The steps of a quorum-loss recovery (chosen by actors/plan/recovery.py).

Each says, once done, where the data came from, the revision the cluster was recovered to and
the highest revision the supervisor had observed before the loss, so the Event and the status
(`lastRecovery`, which its Outcome hands the cluster actor) tell what may have been lost. No
trio and no asyncio: they await the ports.
"""

from __future__ import annotations

from typing import ClassVar

from attrs import frozen

from actors.actions import Action, ActionContext, Outcome, QuorumRecovered, RestoreSeed
from actors.errors import EtcdError
from actors.model import LastRecovery, MemberLaunch, RecoveryPath, RestoreSpec


def loss_note(revision: int, revision_seen: int) -> str:
    """What a recovery to `revision` may have lost, the supervisor having seen `revision_seen`."""
    seen = max(revision_seen, revision)
    lost = seen - revision
    if seen == 0:
        return "no revision was observed before the loss"
    if lost <= 0:
        return f"the supervisor last observed revision {seen}: nothing observed is lost"
    return (
        f"the supervisor last observed revision {seen}: "
        f"the changes of up to {lost} revisions after {revision} may be lost"
    )


@frozen
class RecoverFromSurvivor(Action):
    """Restart the most advanced survivor alone on its data (--force-new-cluster): a one-member
    cluster with the same cluster ID; the dead members become leftovers, learners follow."""

    name: str
    revision: int  # from the probe the plan decided on: it can trail what the survivor holds
    revision_seen: int  # the highest revision observed before the loss
    lost: str  # which voters were gone for good, and why
    event_reason: ClassVar[str] = "QuorumRecoveredFromSurvivor"
    time_limit: ClassVar[float | None] = 120.0  # a graceful stop, then a start on a large WAL

    async def execute(self, ctx: ActionContext) -> Outcome:
        cluster = ctx.observed.cluster
        urls = ctx.observed.runtime_by_name()[self.name].urls
        # The survivor's own revision, asked just before it is stopped: its data does not
        # change after that, so this is what it is rebuilt from (the probe's, if it is silent).
        revision = self.revision
        try:
            revision = max(revision, (await ctx.admin.member_health(urls.client_url)).revision)
        except EtcdError:
            pass
        await ctx.runtime.stop_member(cluster, self.name)
        initial = ((self.name, urls.peer_url),)
        launch = MemberLaunch(cluster, self.name, urls, initial, "existing", ctx.spec, force_new_cluster=True)
        await ctx.runtime.start_member(launch)
        seen = max(self.revision_seen, revision)
        recovery = LastRecovery(RecoveryPath.SURVIVOR, self.name, revision, seen, ctx.wall_clock())
        return Outcome(self._story(revision), remember=QuorumRecovered(recovery))

    def describe(self) -> str:
        return self._story(self.revision)

    def _story(self, revision: int) -> str:
        return (
            f"quorum lost for good ({self.lost}): rebuilt from the most advanced survivor {self.name}"
            f" at revision {revision}; {loss_note(revision, self.revision_seen)}"
        )

    def progress(self) -> str:
        return f"quorum lost for good ({self.lost}): rebuilding from survivor {self.name}"


@frozen
class RecoverFromBackup(Action):
    """Every member's data is gone: a new seed from the newest verified backup, then the old
    members are deleted (in that order, so a failed restore leaves the picture as it was and
    the restore is tried again, never an empty cluster started in its place)."""

    name: str
    source: RestoreSpec
    stale: tuple[str, ...]  # the members whose data is gone
    revision: int  # what the cluster is recovered to
    revision_seen: int  # the highest revision observed before the loss
    event_reason: ClassVar[str] = "QuorumRecoveredFromBackup"
    time_limit: ClassVar[float | None] = RestoreSeed.time_limit
    failure_fails_cluster: ClassVar[bool] = True

    async def execute(self, ctx: ActionContext) -> Outcome:
        await RestoreSeed(self.name, self.source).execute(ctx)
        for name in self.stale:
            await ctx.runtime.delete_member(ctx.observed.cluster, name)
        key = self.source.key or ""
        recovery = LastRecovery(RecoveryPath.BACKUP, key, self.revision, self.revision_seen, ctx.wall_clock())
        return self.done(remember=QuorumRecovered(recovery))

    def describe(self) -> str:
        deltas = " with its delta backups" if self.source.revision is not None else ""
        return (
            f"every member's data was lost: rebuilt from backup {self.source.key}{deltas} at revision"
            f" {self.revision} as seed {self.name}; {loss_note(self.revision, self.revision_seen)}"
        )

    def progress(self) -> str:
        return f"every member's data was lost: restoring seed {self.name} from backup {self.source.key}"

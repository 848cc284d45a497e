"""Actions: the steps a planner can choose, each carrying everything about itself.

An action knows how it runs against the ports (`execute`, which returns its `Outcome`: the
audit line, what it measured, what the cluster actor keeps in mind), the Event reason it is
recorded under, how it reads before it runs (`describe`) and in the status while it is the
next step (`progress`). The cluster actor only calls these and reads the Outcome, so adding a
step is adding one class here (or anywhere) and a planner that returns it; nothing else
changes. Every action class joins `Action.kinds` as it is defined (the metrics read it).

No trio and no asyncio: `execute` awaits the ports and reads the clocks it is given.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, TypeVar

from attrs import field, frozen

from actors.backup.ports import Restored, SeedRestorer
from actors.errors import EtcdError, MemberNotFound, RestoreFailed
from actors.maintenance.board import MaintenanceBoard
from actors.measurements import Measurement
from actors.model import ClusterSpec, LastRecovery, MemberLaunch, RestoreSpec
from actors.observed import Observed
from actors.ports import EtcdAdmin, EventSink, MemberRuntime

T = TypeVar("T")


@frozen
class ActionContext:
    """What an action may use: the spec in force, what was observed, and the ports."""

    spec: ClusterSpec
    observed: Observed
    runtime: MemberRuntime
    admin: EtcdAdmin
    restorer: SeedRestorer | None = None
    # The defrag round under way: maintenance steps record their progress on it.
    maintenance: MaintenanceBoard = field(factory=MaintenanceBoard)
    events: EventSink | None = None  # for what a step finds beyond its own Event (a hash check)
    sleep: Callable[[float], Awaitable[None]] | None = None  # to wait for a member to answer
    # Seconds on the cluster actor's clock (trio's), for how long a part of a step took.
    clock: Callable[[], float] = time.monotonic
    # Unix seconds, for what the status records for people (when a recovery happened).
    wall_clock: Callable[[], float] = time.time

    @property
    def endpoints(self) -> list[str]:
        return self.observed.endpoints()


# --- what a step leaves behind ------------------------------------------------------------------


@frozen
class RestartedForSilence:
    """A member restarted for not answering: silent again after this, it is replaced."""

    name: str


@frozen
class QuorumRecovered:
    """The cluster was rebuilt after a quorum loss: the status records it, and the recovered
    history (up to `recovery.revision`) is the one to follow from now on."""

    recovery: LastRecovery


# What the cluster actor keeps in mind once a step succeeded (most steps: nothing).
@frozen
class VanishedFromEtcd:
    """A runtime member was deleted because etcd no longer lists it: the next member added
    waits longer each time this repeats (actors/plan/size.py)."""

    name: str


@frozen
class MemberJoined:
    """A learner became a voting member: members no longer vanish."""

    name: str


Memo = RestartedForSilence | QuorumRecovered | VanishedFromEtcd | MemberJoined


@frozen
class Outcome:
    """What a step did, as it turned out: the text of its audit Event, the numbers it measured
    (for the metrics beside the Event) and what the cluster actor must remember."""

    description: str
    measured: Measurement | None = None
    remember: Memo | None = None


class Action(abc.ABC):
    """One step towards the spec. Subclasses are attrs.frozen records of their arguments."""

    __slots__ = ()

    # Every action class by name, joined as it is defined: the metrics tell operations from
    # Event reasons with it (no walk of __subclasses__, no list to keep up to date).
    kinds: ClassVar[dict[str, type[Action]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        known = Action.kinds.get(cls.__name__)
        # attrs rebuilds a slotted class under the same name: that is the same action.
        if known is not None and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
            raise TypeError(f"two actions are named {cls.__name__}: {known.__module__} and {cls.__module__}")
        Action.kinds[cls.__name__] = cls

    # The Kubernetes Event reason (CamelCase) recorded when the action succeeded.
    event_reason: ClassVar[str]
    # How long the step may take; None: the cluster actor's usual bound (a few etcd calls).
    time_limit: ClassVar[float | None] = None
    # A failure of this step leaves the cluster Failed (with the reason) until it succeeds.
    failure_fails_cluster: ClassVar[bool] = False

    @abc.abstractmethod
    async def execute(self, ctx: ActionContext) -> Outcome:
        """Carry the step out and say how it went; raise EtcdError (or time out) when refused
        or unreachable."""

    @abc.abstractmethod
    def describe(self) -> str:
        """What the step does, in the words of the audit trail: "added learner demo-3"."""

    @abc.abstractmethod
    def progress(self) -> str:
        """What is under way, for the status message: "adding member demo-3"."""

    @property
    def failure_reason(self) -> str:
        return f"{type(self).__name__}Failed"

    def done(self, measured: Measurement | None = None, remember: Memo | None = None) -> Outcome:
        """The common outcome: what `describe()` says was done, and what else there is to tell."""
        return Outcome(self.describe(), measured, remember)


@frozen
class Wait:
    """Nothing safe to do now; why, for the status message."""

    reason: str


Step = Action | Wait


# --- starting members ---------------------------------------------------------------------------


@frozen
class StartSeed(Action):
    """Bootstrap: start the first member alone, as a new one-member cluster."""

    name: str
    event_reason: ClassVar[str] = "SeedStarted"

    async def execute(self, ctx: ActionContext) -> Outcome:
        cluster = ctx.observed.cluster
        urls = await ctx.runtime.allocate_member(cluster, self.name, ctx.spec)
        initial = ((self.name, urls.peer_url),)
        await ctx.runtime.start_member(MemberLaunch(cluster, self.name, urls, initial, "new", ctx.spec))
        return self.done()

    def describe(self) -> str:
        return f"started seed member {self.name}"

    def progress(self) -> str:
        return f"starting seed member {self.name}"


@frozen
class RestoreSeed(Action):
    """Bootstrap from a backup: the first member starts on the backup's data, as a cluster of
    its own (a new cluster ID: members of the backed-up cluster can never join it)."""

    name: str
    source: RestoreSpec
    event_reason: ClassVar[str] = "RestoredFromBackup"
    time_limit: ClassVar[float | None] = 3600.0  # fetching and restoring a large snapshot
    failure_fails_cluster: ClassVar[bool] = True

    async def execute(self, ctx: ActionContext) -> Outcome:
        if ctx.restorer is None:
            raise RestoreFailed("this runtime cannot restore backups")
        cluster = ctx.observed.cluster
        urls = await ctx.runtime.allocate_member(cluster, self.name, ctx.spec)
        launch = MemberLaunch(cluster, self.name, urls, ((self.name, urls.peer_url),), "new", ctx.spec)
        try:
            restored = await ctx.restorer.restore_seed(launch, self.source)
            await ctx.runtime.start_member(launch)
            checked = await _compare_hash(ctx, urls.client_url, restored)
        except (RestoreFailed, EtcdError):
            await ctx.runtime.delete_member(cluster, self.name)  # nothing half-built stays
            raise
        if ctx.events is not None:
            reason = "RestoreVerified" if restored.kv_hash is not None else "RestoreNotVerified"
            await ctx.events.record(
                cluster, reason=reason, message=f"{self.name} from {restored.key}: {checked}"
            )
        return self.done()

    def describe(self) -> str:
        return f"started seed member {self.name} on the data of {self.source.describe()} (sha256 checked)"

    def progress(self) -> str:
        return f"restoring seed member {self.name} from {self.source.describe()}"


# How long a restored seed may take to serve (loading a large database), and how often it is
# asked meanwhile: often, since a restore is done only when its seed serves.
SEED_ANSWER_TRIES = 6000
SEED_ANSWER_PAUSE = 0.05


async def _compare_hash(ctx: ActionContext, client_url: str, restored: Restored) -> str:
    """The restored seed's HashKV at the backup's revision against the one the backup recorded:
    what was found, in words; RestoreFailed when they differ."""
    if restored.kv_hash is None:
        return "the backup records no HashKV (it was not verified when taken): nothing to compare"
    # Serving first (a linearizable read answered: what it started with is applied), hashing
    # second: HashKV holds etcd's read transaction for its whole pass over the database (about
    # a second a GiB), and an entry still to apply then would wait for it, and clients with it.
    await _until_it_answers(ctx, lambda: ctx.admin.revision([client_url]))
    seed = await _until_it_answers(ctx, lambda: ctx.admin.kv_hash(client_url, restored.revision))
    if seed.hash != restored.kv_hash:
        raise RestoreFailed(
            f"the restored data differ from backup {restored.key}: HashKV at revision {restored.revision} "
            f"is {seed.hash}, the backup recorded {restored.kv_hash}"
        )
    return f"HashKV {seed.hash} at revision {restored.revision} equals the backup's"


async def _until_it_answers(ctx: ActionContext, ask: Callable[[], Awaitable[T]]) -> T:
    """`ask()`, again after a pause while the seed is still loading its database."""
    for attempt in range(SEED_ANSWER_TRIES):
        try:
            return await ask()
        except EtcdError:
            if attempt == SEED_ANSWER_TRIES - 1 or ctx.sleep is None:
                raise
            await ctx.sleep(SEED_ANSWER_PAUSE)
    raise AssertionError("unreachable")


@frozen
class StartMember(Action):
    """Start a member's process: a learner just added, or a member restarting from its data."""

    name: str
    initial_cluster: tuple[tuple[str, str], ...]
    reason: str
    event_reason: ClassVar[str] = "MemberStarted"

    async def execute(self, ctx: ActionContext) -> Outcome:
        urls = ctx.observed.runtime_by_name()[self.name].urls
        initial = self.initial_cluster or ((self.name, urls.peer_url),)
        launch = MemberLaunch(ctx.observed.cluster, self.name, urls, initial, "existing", ctx.spec)
        await ctx.runtime.start_member(launch)
        return self.done()

    def describe(self) -> str:
        return f"started member {self.name}: {self.reason}"

    def progress(self) -> str:
        return self.reason


async def restart_on_its_data(ctx: ActionContext, name: str, initial: tuple[tuple[str, str], ...]) -> None:
    """Stop a member's process and start it again on its data, with the spec in force."""
    cluster = ctx.observed.cluster
    urls = ctx.observed.runtime_by_name()[name].urls
    await ctx.runtime.stop_member(cluster, name)
    await ctx.runtime.start_member(MemberLaunch(cluster, name, urls, initial, "existing", ctx.spec))


@frozen
class RestartMember(Action):
    """Kill a member whose process runs but does not answer, and start it again from its data."""

    name: str
    initial_cluster: tuple[tuple[str, str], ...]
    reason: str
    event_reason: ClassVar[str] = "MemberRestarted"

    async def execute(self, ctx: ActionContext) -> Outcome:
        await restart_on_its_data(ctx, self.name, self.initial_cluster)
        return self.done(remember=RestartedForSilence(self.name))

    def describe(self) -> str:
        return f"restarted member {self.name}: {self.reason}"

    def progress(self) -> str:
        return f"restarting {self.name}: {self.reason}"


@frozen
class RollMember(Action):
    """Restart a healthy member on its data with the spec's configuration (a rolling restart:
    a new etcd version or image, changed flags)."""

    name: str
    version: str
    initial_cluster: tuple[tuple[str, str], ...]
    why: str = ""  # "" for a new configuration
    event_reason: ClassVar[str] = "MemberRolled"
    # etcd's graceful stop (a pod's grace period on Kubernetes), then the start.
    time_limit: ClassVar[float | None] = 120.0

    async def execute(self, ctx: ActionContext) -> Outcome:
        await restart_on_its_data(ctx, self.name, self.initial_cluster)
        return self.done()

    def describe(self) -> str:
        return f"restarted member {self.name} {self._purpose()}"

    def progress(self) -> str:
        return f"rolling restart: restarting {self.name} {self._purpose()}"

    def _purpose(self) -> str:
        return self.why or f"with the new configuration (etcd {self.version})"


@frozen
class EnableDowngrade(Action):
    """Ask etcd to lower the cluster version by one minor (validated first), so members of that
    older minor can run on the cluster's data; members are then rolled back one at a time."""

    cluster_version: str  # "3.5.0"
    event_reason: ClassVar[str] = "DowngradeEnabled"

    async def execute(self, ctx: ActionContext) -> Outcome:
        await ctx.admin.downgrade(ctx.endpoints, "VALIDATE", self.cluster_version)
        await ctx.admin.downgrade(ctx.endpoints, "ENABLE", self.cluster_version)
        return self.done()

    def describe(self) -> str:
        return f"etcd validated and enabled a downgrade of the cluster version to {self.cluster_version}"

    def progress(self) -> str:
        return f"enabling etcd's downgrade to cluster version {self.cluster_version}"


# --- membership ---------------------------------------------------------------------------------


@frozen
class AddLearner(Action):
    """Reserve addresses for a new member, add it to etcd as a learner, and start it."""

    name: str
    event_reason: ClassVar[str] = "LearnerAdded"

    async def execute(self, ctx: ActionContext) -> Outcome:
        cluster = ctx.observed.cluster
        # Addresses first, so etcd never lists a peer URL the runtime cannot serve.
        urls = await ctx.runtime.allocate_member(cluster, self.name, ctx.spec)
        try:
            await ctx.admin.add_learner(ctx.endpoints, urls.peer_url)
        except EtcdError:
            # Give the addresses back; if etcd did add it after all, the leftovers planner
            # removes the learner that has no runtime member.
            await ctx.runtime.delete_member(cluster, self.name)
            raise
        # Started in the same step: what it starts with follows from what this step did, and a
        # fresh look first would cost a bootstrap a round of listings per member. A start that
        # fails leaves a learner not started, which the learner planner starts again.
        joining = ctx.observed.initial_cluster(self.name, urls.peer_url)
        await ctx.runtime.start_member(MemberLaunch(cluster, self.name, urls, joining, "existing", ctx.spec))
        return self.done()

    def describe(self) -> str:
        return f"added learner {self.name} and started it"

    def progress(self) -> str:
        return f"adding member {self.name}"


@frozen
class PromoteLearner(Action):
    name: str
    member_id: int
    event_reason: ClassVar[str] = "LearnerPromoted"

    async def execute(self, ctx: ActionContext) -> Outcome:
        await ctx.admin.promote(ctx.endpoints, self.member_id)
        return self.done(remember=MemberJoined(self.name))

    def describe(self) -> str:
        return f"promoted learner {self.name} to voting member"

    def progress(self) -> str:
        return f"promoting learner {self.name}"


@frozen
class MoveLeader(Action):
    to_name: str
    to_id: int
    reason: str
    event_reason: ClassVar[str] = "LeaderMoved"

    async def execute(self, ctx: ActionContext) -> Outcome:
        await ctx.admin.move_leader(ctx.endpoints, self.to_id)
        return self.done()

    def describe(self) -> str:
        return f"moved leadership to {self.to_name}: {self.reason}"

    def progress(self) -> str:
        return self.reason


@frozen
class RemoveMember(Action):
    """Remove a member from etcd's membership, then delete it from the runtime."""

    member_id: int
    name: str
    reason: str
    event_reason: ClassVar[str] = "MemberRemoved"

    async def execute(self, ctx: ActionContext) -> Outcome:
        try:
            await ctx.admin.remove(ctx.endpoints, self.member_id)
        except MemberNotFound:
            pass  # removed already, by an earlier incarnation of the cluster actor
        if self.name:
            await ctx.runtime.delete_member(ctx.observed.cluster, self.name)
        return self.done(remember=VanishedFromEtcd(self.name))

    def describe(self) -> str:
        return f"removed member {self.name} ({self.member_id:x}): {self.reason}"

    def progress(self) -> str:
        return self.reason


@frozen
class DeleteRuntimeMember(Action):
    """Delete a runtime member etcd does not know (a leftover of an interrupted change)."""

    name: str
    reason: str
    event_reason: ClassVar[str] = "MemberDeleted"

    async def execute(self, ctx: ActionContext) -> Outcome:
        await ctx.runtime.delete_member(ctx.observed.cluster, self.name)
        return self.done(remember=VanishedFromEtcd(self.name))

    def describe(self) -> str:
        return f"deleted {self.name}: {self.reason}"

    def progress(self) -> str:
        return self.reason


# --- hibernation --------------------------------------------------------------------------------


@frozen
class StopMembers(Action):
    """Stop every running member, its data kept (spec.hibernate): followers first, the leader
    last, so no election follows each stop. Membership is untouched: the members come back as
    they were when their processes start again on their data."""

    names: tuple[str, ...]
    backup: str  # the final backup's key; "" when none was taken (and why, in `without`)
    without: str = ""
    event_reason: ClassVar[str] = "Hibernated"
    time_limit: ClassVar[float | None] = 120.0  # each member's graceful stop

    async def execute(self, ctx: ActionContext) -> Outcome:
        for name in self.names:
            await ctx.runtime.stop_member(ctx.observed.cluster, name)
        return self.done()

    def describe(self) -> str:
        return f"hibernated: stopped {', '.join(self.names)}, data kept; {self._backup()}"

    def progress(self) -> str:
        return f"hibernating: stopping {', '.join(self.names)} (data kept); {self._backup()}"

    def _backup(self) -> str:
        return f"final backup {self.backup}" if self.backup else (self.without or "no final backup")

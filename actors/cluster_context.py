"""What the children of one cluster's tree share with its cluster actor, and nothing more.

A per-cluster child (backups, defragmentation, the metrics' registration) gets a
`ClusterContext`: who the cluster is, what is wanted (`Desired`), what the cluster actor last
observed (`ObservedFeed`), the ports, where to report for the status (`ServiceReports`) and
the cluster actor's mailbox, to `nudge` it (`LookAgain`, `ServicesReported`). Children import
this module, never `actors.cluster` (a layers contract in pyproject.toml says so), so the
cluster actor can change without them.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio
from attrs import frozen

from actors.backup.health import BackupReport
from actors.certificates import TlsReport
from actors.maintenance.board import MaintenanceBoard
from actors.member import MemberProbed
from actors.model import ClusterRef, ClusterResource, ClusterStatus, LastBackup
from actors.observed import Observed
from actors.ports import ClusterPorts
from supervisor.runtime import ChildSpec, Handle, Reply


@frozen
class Timing:
    tick: float = 1.0  # health tick: probes, and a fresh look at everything
    # A member that just started is probed this often until it serves, for at most
    # eager_window: a pod may take seconds to be scheduled and started, and its status only
    # shows it running up to a kubelet relist later, so the member's own answer comes first.
    # Every step of a bootstrap waits on such an answer; a probe of a member not serving yet
    # fails at once (no address yet, or a refused connection), so asking often costs little.
    eager_probe_interval: float = 0.025
    eager_window: float = 5.0
    call_timeout: float = 5.0  # one etcd or runtime call
    probe_timeout: float = 1.0
    health_ttl: float = 3.0  # a probe older than this no longer counts


@frozen
class Desired:
    """What the user asked for, and what was wrong with their latest edit, if anything."""

    resource: ClusterResource
    problem: str | None = None  # an invalid edit keeps the last good spec, reported here


class ServiceReports:
    """What per-cluster children report for the cluster's status (the backup actor's outcome).

    Written by the children, read by the cluster actor when it assesses; outlives both.
    """

    def __init__(self) -> None:
        self.backup: BackupReport | None = None
        self.maintenance = MaintenanceBoard()  # the defrag round: started by the defrag actor or the plan
        # The last revision the stored delta chunks reach, without a gap from a verified snapshot.
        self.deltas_reach = 0
        # Why the last copy of delta chunks to spec.backup.copyTo failed ("": it worked), from
        # the delta follower; the backup actor's own copies are in `backup`.
        self.deltas_second_site = ""
        # The certificates the renewal child last read (TLS clusters with generated certificates).
        self.tls: TlsReport | None = None
        # spec.hibernate: the backup taken for the hibernation under way (None: none yet, or awake).
        self.final_backup: LastBackup | None = None

    def backup_report(self) -> BackupReport | None:
        """The backup actor's report, with a failing copy of delta chunks counted as a failing
        second site too (BackupHealthy SecondSiteFailing, as for snapshots)."""
        report = self.backup
        if report is None or not self.deltas_second_site:
            return report
        failing = "; ".join(why for why in (report.second_site, self.deltas_second_site) if why)
        return attrs.evolve(report, second_site=failing)


class ObservedFeed:
    """The latest `Observed` the cluster actor acted on, for per-cluster children to read.

    Children never observe on their own: they read what the cluster actor saw, so every part
    of a cluster's tree agrees on who is healthy and who leads. Outlives actor restarts.
    """

    def __init__(self) -> None:
        self._latest: Observed | None = None
        self._published = trio.Event()

    @property
    def latest(self) -> Observed | None:
        return self._latest

    def publish(self, observed: Observed) -> None:
        self._latest = observed
        self._published.set()
        self._published = trio.Event()

    async def wait_next(self) -> Observed:
        """The next `Observed` published from now on."""
        await self._published.wait()
        assert self._latest is not None
        return self._latest


# --- messages -------------------------------------------------------------------------------


@frozen
class SpecChanged:
    pass


@frozen
class LookAgain:
    """Re-read the runtime and etcd's membership: a step was taken, or the actor just started."""


@frozen
class Tick:
    pass


@frozen
class ServicesReported:
    """A per-cluster child changed what it reports: assess again (nothing to re-read)."""


@frozen
class RuntimeChanged:
    name: str


@frozen
class GetStatus:
    reply: Reply[ClusterStatus | None]


ClusterMessage = SpecChanged | LookAgain | Tick | RuntimeChanged | MemberProbed | ServicesReported | GetStatus


def nudge(handle: Handle[ClusterMessage], msg: ClusterMessage) -> None:
    """Deliver an observation without ever blocking the caller (a watch, a probe, a timer)."""
    try:
        handle.send_nowait(msg)
    except (trio.WouldBlock, trio.ClosedResourceError):
        pass  # a full mailbox already holds a look-again; a closed one has no reader


@frozen
class ClusterContext:
    """What a per-cluster child gets: who the cluster is, what is wanted, what was seen, the ports."""

    ref: ClusterRef
    desired: Callable[[], Desired]
    ports: ClusterPorts
    timing: Timing
    feed: ObservedFeed
    handle: Handle[ClusterMessage]  # to nudge the cluster actor
    reports: ServiceReports  # what the children report for the status


# A per-cluster child beside the members and the cluster actor (backup schedule, defrag, ...).
ChildFactory = Callable[[ClusterContext], ChildSpec]

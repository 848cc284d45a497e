"""The one wiring seam: what a mode gives the actors (a Platform), and `open_supervisor`, which
turns it into running cluster trees.

Every entry point goes through here: the local daemon (supervisor/local/platform.py), the
Kubernetes operator (KubeClusters in supervisor/kube/clusters.py), and the lifecycle and chaos
tests (supervisor/local/embedded.py), so what the tests prove is what production wires. A new
mode is a Platform of its adapters and a call to open_supervisor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

from attrs import frozen

from actors.auth_actor import auth_child
from actors.backup.ports import BackupKeySource, BackupRequests, SeedRestorer
from actors.backup.services import BackupTiming, StoreOpener, VerifierFactory, backup_service, delta_service
from actors.cluster_context import ChildFactory, Timing
from actors.fleet import ROOT_INTENSITY, Fleet, open_fleet
from actors.model import ClusterResource
from actors.plan import PLANNERS, Planner
from actors.ports import (
    AuthFactory,
    CertificateStore,
    ClusterPorts,
    EtcdAdmin,
    EventSink,
    MemberRuntime,
    StatusSink,
)
from actors.publish_nudge import publish_nudge_child
from actors.renewal import renewal_child
from supervisor.runtime import Intensity

# Opens a cluster's own etcd admin (its endpoints' TLS from the cluster's certificates); the
# fleet closes it with the cluster's ports.
AdminFactory = Callable[[ClusterResource], EtcdAdmin]


@frozen
class Platform:
    """Everything a mode provides the actors of every cluster.

    The runtime, the sinks, the restorer, the stores and the verifier are shared by every
    cluster and belong to whoever made them; `admin_for` opens each cluster's own admin.
    """

    runtime: MemberRuntime
    status: StatusSink
    events: EventSink
    admin_for: AdminFactory
    # Restores a new cluster's seed from a backup (spec.restore); None where that is not built.
    restorer: SeedRestorer | None = None
    # Where backups go: with it, every cluster runs the backup children (actors/backup/services.py);
    # None: no backups.
    stores: StoreOpener | None = None
    # How a backup is verified; None: backups are stored unverified.
    verifier: VerifierFactory | None = None
    # On-demand backups (EtcdBackup); None: scheduled ones only.
    requests: BackupRequests | None = None
    # The generated certificates of TLS clusters: with it, every cluster runs the renewal child
    # (actors/renewal.py); None: certificates are never renewed.
    certificates: CertificateStore | None = None
    # Backup encryption keys (spec.backup.encryption.keySecret); None: encrypted backups fail.
    keys: BackupKeySource | None = None
    # etcd's users and roles (spec.security.auth): with it, every cluster runs the auth child
    # (actors/auth_actor.py); None: spec.security.auth is not acted on.
    auth_for: AuthFactory | None = None

    def ports_for(self, resource: ClusterResource) -> ClusterPorts:
        return ClusterPorts(self.runtime, self.admin_for(resource), self.status, self.events, self.restorer)

    def services(self, timing: BackupTiming) -> list[ChildFactory]:
        """The per-cluster children the platform's ports make possible: the publish nudge,
        certificate renewal, backups and deltas."""
        children = [publish_nudge_child()]
        if self.certificates is not None:
            children.append(renewal_child(self.certificates))
        if self.auth_for is not None:
            children.append(auth_child(self.auth_for))
        if self.stores is None:
            return children
        return [
            *children,
            backup_service(self.stores, self.verifier, self.requests, timing, self.keys),
            delta_service(self.stores, self.verifier, timing, self.keys),
        ]


@asynccontextmanager
async def open_supervisor(
    platform: Platform,
    *,
    name: str = "clusters",
    timing: Timing | None = None,
    intensity: Intensity = ROOT_INTENSITY,
    children: Sequence[ChildFactory] = (),
    backup_timing: BackupTiming | None = None,
    planners: Sequence[Planner] = PLANNERS,
) -> AsyncIterator[Fleet]:
    """The fleet on `platform`, for the life of the block: each cluster's ports from the
    platform, and as its children the platform's services, then `children` (the mode's own:
    defragmentation, metrics, a test's)."""
    services = platform.services(backup_timing or BackupTiming())
    async with open_fleet(
        platform.ports_for,
        name=name,
        timing=timing,
        intensity=intensity,
        children=[*services, *children],
        planners=planners,
    ) as fleet:
        yield fleet

"""The ports the actors need from the outside world, as Protocols.

Adapters implement them: supervisor.local (etcd processes on loopback) and supervisor.kube
(pods and volumes) for MemberRuntime; supervisor.etcd for EtcdAdmin; the CLI wires them.
Actor tests use small in-memory fakes of these, never of etcd itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from attrs import frozen

from actors.auth_plan import AuthState, AuthStep
from actors.backup.ports import SeedRestorer
from actors.backup.records import KvHash, SnapshotTaken
from actors.certificates import CertificateState, RotationRecord
from actors.measurements import Measurement
from actors.model import (
    CertificatesSpec,
    ClusterRef,
    ClusterSpec,
    ClusterStatus,
    EtcdMember,
    IssuerRef,
    MemberConfig,
    MemberHealth,
    MemberLaunch,
    MemberUrls,
    RuntimeMember,
    UserSpec,
)

# Called by a runtime, without blocking, whenever a member's process or data changes, so the
# cluster actor re-observes at once instead of waiting for its next health tick.
MemberChanged = Callable[[str], None]


class MemberRuntime(Protocol):
    """Where a cluster's members live: processes on loopback, or pods with volumes.

    Every method is idempotent, and all state is read back from the runtime itself (disk,
    API server), never from memory, so a restarted actor sees what really exists.
    """

    async def list_members(self, cluster: ClusterRef) -> Sequence[RuntimeMember]:
        """Every member this runtime holds for the cluster, running or not."""
        ...

    async def allocate_member(self, cluster: ClusterRef, name: str, spec: ClusterSpec) -> MemberUrls:
        """Reserve a member's addresses (ports, DNS names) before etcd is told about it.

        `spec` is the spec in force (never re-read from elsewhere: a refused edit must not leak in).
        """
        ...

    async def start_member(self, launch: MemberLaunch) -> None:
        """Start (or restart, keeping its data) one member. A no-op if it already runs.

        Records `member_config(launch.spec).fingerprint` as the member's `config`.
        """
        ...

    def member_config(self, spec: ClusterSpec) -> MemberConfig:
        """The configuration members of `spec` run with here (pure: no I/O beyond a stat)."""
        ...

    async def stop_member(self, cluster: ClusterRef, name: str) -> None:
        """Stop a member's process, keeping its data."""
        ...

    async def delete_member(self, cluster: ClusterRef, name: str) -> None:
        """Stop a member and delete its data and addresses."""
        ...

    async def delete_cluster(self, cluster: ClusterRef, *, keep_data: bool) -> None:
        """Remove everything the runtime holds for the cluster (data too unless keep_data)."""
        ...

    def watch_members(self, cluster: ClusterRef, on_change: MemberChanged) -> Callable[[], None]:
        """Call on_change(member name) on every change; returns a function that unsubscribes."""
        ...


class StatusSink(Protocol):
    """Where a cluster's status goes: status.json files locally, the status subresource on Kubernetes."""

    async def publish(self, cluster: ClusterRef, status: ClusterStatus) -> None: ...


class EventSink(Protocol):
    """The audit trail: one record per operation performed on a cluster (Kubernetes Events).

    `measured`: what the operation measured, as data for the metrics (an Event sink ignores it)."""

    async def record(
        self,
        cluster: ClusterRef,
        *,
        reason: str,
        message: str,
        warning: bool = False,
        measured: Measurement | None = None,
    ) -> None: ...


class EtcdAuth(Protocol):
    """One cluster's etcd users and roles (spec.security.auth), and its users' credentials."""

    async def read(self, endpoints: Sequence[str]) -> AuthState:
        """What etcd holds: auth on or off, every user's roles, every role's permissions."""
        ...

    async def apply(self, endpoints: Sequence[str], step: AuthStep) -> None:
        """One step; a user's password is read from its passwordSecret here, and the record of
        a password set is written after it (actors/auth_passwords.py)."""
        ...

    async def password(self, secret: str) -> str:
        """The password in a passwordSecret (a Secret, locally a file); EtcdError when it
        cannot be read."""
        ...

    async def issue_user_certificate(self, user: UserSpec, certificates: CertificatesSpec) -> bool:
        """The user's client certificate (CN = its name) where clientCertSecret says, made when
        missing or due for renewal; True when it was written."""
        ...


# Opens each cluster's EtcdAuth.
AuthFactory = Callable[[ClusterRef], EtcdAuth]


class ClusterSinks(StatusSink, EventSink, Protocol):
    """A status sink that is also the event sink (the local daemon's files, a test's recorder)."""


class EtcdAdmin(Protocol):
    """The etcd operations the actors perform, aimed at a set of client endpoints.

    Errors are the typed exceptions of actors.errors, so plan code can tell a learner that
    is not yet in sync from an unreachable cluster.
    """

    async def member_list(self, endpoints: Sequence[str]) -> Sequence[EtcdMember]: ...

    async def add_learner(self, endpoints: Sequence[str], peer_url: str) -> EtcdMember: ...

    async def auth_enabled(self, endpoints: Sequence[str]) -> bool:
        """Whether etcd's auth is on (AuthStatus; etcd 3.4 is asked through Authenticate).
        AuthRefused when etcd will not say: with auth on, only a root user may ask."""
        ...

    async def promote(self, endpoints: Sequence[str], member_id: int) -> None: ...

    async def remove(self, endpoints: Sequence[str], member_id: int) -> None: ...

    async def move_leader(self, endpoints: Sequence[str], target_id: int) -> None: ...

    async def downgrade(self, endpoints: Sequence[str], action: str, version: str) -> str:
        """etcd's downgrade API (3.6+): action VALIDATE, ENABLE or CANCEL towards `version`'s
        minor; returns the cluster version etcd reports. EtcdError when etcd refuses."""
        ...

    async def member_health(self, client_url: str) -> MemberHealth:
        """Status of exactly this member (never failed over to another one)."""
        ...

    async def revision(self, endpoints: Sequence[str]) -> int:
        """The cluster's current store revision."""
        ...

    async def snapshot(self, endpoint: str, sink: Callable[[bytes], Awaitable[None]]) -> SnapshotTaken:
        """Stream exactly this member's database into `sink`, etcd's trailing checksum checked."""
        ...

    async def kv_hash(self, endpoint: str, revision: int) -> KvHash:
        """HashKV of exactly this member at `revision` (EtcdError once it is compacted away)."""
        ...

    async def compact(self, endpoints: Sequence[str], revision: int) -> None:
        """Compact the history up to `revision` (done already counts as done)."""
        ...

    async def defragment(self, client_url: str) -> None:
        """Defragment exactly this member's backend (it serves nothing meanwhile)."""
        ...

    async def append_empty_entry(self, endpoints: Sequence[str]) -> None:
        """Commit one raft entry that changes nothing (an alarm list, which etcd takes through
        raft): every member then applies a new entry (actors/publish_nudge.py says why)."""
        ...

    async def disarm_nospace(self, endpoints: Sequence[str]) -> int:
        """Clear every member's NOSPACE alarm; how many there were."""
        ...

    async def aclose(self) -> None:
        """Close the connections; whoever opened the admin closes it."""
        ...


class CertificateStore(Protocol):
    """Where a mode keeps its TLS clusters' generated certificates (local: files under the
    cluster's directory; Kubernetes: the cluster's TLS Secret). The renewal child
    (actors/renewal.py) decides; the store only reads and re-signs."""

    async def read(self, cluster: ClusterRef) -> CertificateState | None:
        """The CA and every leaf in use, or None while the cluster has no certificates yet."""
        ...

    async def renew(self, cluster: ClusterRef, names: Sequence[str], lifetime: float) -> None:
        """Re-sign the named leaves with the same CA for `lifetime` seconds, in place, so that
        whoever reads them (etcd at each handshake, our clients) never sees half of a pair."""
        ...

    # A CA rotation's phases (actors/ca_rotation.py), each a change the next read shows.

    async def begin_ca_rotation(
        self, cluster: ClusterRef, ca_lifetime: float, record: RotationRecord
    ) -> None:
        """Make a new CA and trust it beside the signing one; keep `record` with it."""
        ...

    async def switch_ca(self, cluster: ClusterRef, lifetime: float) -> None:
        """Re-sign every leaf (for `lifetime` seconds) with the new CA, which then signs."""
        ...

    async def drop_old_ca(self, cluster: ClusterRef) -> None:
        """Trust only the signing CA."""
        ...

    async def write_record(self, cluster: ClusterRef, record: RotationRecord) -> None:
        """Keep what the store remembers of rotations."""
        ...

    # Whether follow_source takes a cert-manager issuer (spec.security.tls.issuerRef): on
    # Kubernetes only; elsewhere issuerRef is ignored and the certificates are generated.
    follows_issuers: bool

    async def follow_source(self, cluster: ClusterRef, source: str | IssuerRef) -> None:
        """Take the certificates from the user's Secret `source` (spec.security.tls.secretRef),
        or from the Secrets cert-manager writes for the cluster's Certificates (issuerRef), into
        the cluster's material, when they changed; CertificatesRefused, naming what is wrong,
        when they cannot be used (the material in use is then kept)."""
        ...


@frozen
class ClusterPorts:
    """Everything one cluster's actors use of the outside world.

    The runtime and the sinks are shared by every cluster and belong to whoever made them;
    the admin is the cluster's own, and closing the ports closes it.
    """

    runtime: MemberRuntime
    admin: EtcdAdmin
    status: StatusSink
    events: EventSink
    # Restores a new cluster's seed from a backup (spec.restore); None where that is not built.
    restorer: SeedRestorer | None = None

    async def aclose(self) -> None:
        await self.admin.aclose()

"""Values of the domain: what the user asked for, what was observed, what the status says.

Everything here is an immutable attrs record with no I/O and no async runtime, so plan.py can
decide from these alone and tests can build them by hand.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Any

from attrs import evolve, field, frozen

API_GROUP = "etcd.io"
API_VERSION = "v1alpha1"
KIND = "EtcdCluster"
# A changed value starts one CA rotation (actors/ca_rotation.py).
ROTATE_CA_ANNOTATION = "etcd.io/rotate-ca"
# "true": the supervisor changes nothing, only observes and reports (phase Suspended).
SUSPEND_ANNOTATION = "etcd.io/suspend"

DEFAULT_SIZE = 3
MIN_SIZE = 1
MAX_SIZE = 9
DEFAULT_VERSION = "3.6.16"
DEFAULT_REPOSITORY = "quay.io/coreos/etcd"
DEFAULT_STORAGE_SIZE = "10Gi"
DEFAULT_UNRESPONSIVE_AFTER = "30s"

# A Go duration as Kubernetes resources spell them: 90s, 1m30s, 1.5h, 500ms.
DURATION_PATTERN = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(text: str) -> float:
    """Seconds in a Go duration string; ValueError when it is not one."""
    if not DURATION_PATTERN.match(text):
        raise ValueError(f"not a duration such as 90s or 1m30s: {text!r}")
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))


@frozen(order=True)
class ClusterRef:
    """A cluster's identity: the namespace and name of its EtcdCluster resource."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class ReclaimPolicy(enum.StrEnum):
    """What happens to member volumes when the cluster is deleted."""

    RETAIN = "Retain"
    DELETE = "Delete"


class ImageFamily(enum.StrEnum):
    """Container images configure etcd differently; detected from the repository."""

    OFFICIAL = "official"  # quay.io/coreos/etcd, gcr.io/etcd-development/etcd: flags, tag "v3.5.21"
    BITNAMI = "bitnami"  # bitnami/etcd: its binaries under /opt/bitnami, uid 1001, tag "3.5.21"


@frozen
class StorageSpec:
    size: str = DEFAULT_STORAGE_SIZE
    storage_class_name: str | None = None
    reclaim_policy: ReclaimPolicy = ReclaimPolicy.RETAIN


@frozen
class ResourceSpec:
    requests: Mapping[str, str] = field(factory=dict)
    limits: Mapping[str, str] = field(factory=dict)


DEFAULT_CERT_VALIDITY = "2160h"  # 90 days
DEFAULT_CA_VALIDITY = "87600h"  # 10 years
# The shortest leaf life accepted: short enough for a test to see several renewals, long
# enough that a renewal (a signature and a file rename) always fits well inside it.
MIN_CERT_VALIDITY_SECONDS = 30.0


@frozen
class CertificatesSpec:
    """spec.security.tls.certificates: the lives of the certificates the supervisor generates."""

    validity: str = DEFAULT_CERT_VALIDITY  # each leaf's life
    renew_before: str | None = None  # renew when this much is left; None: a third of validity
    ca_validity: str = DEFAULT_CA_VALIDITY

    @property
    def validity_seconds(self) -> float:
        return duration_seconds(self.validity)

    @property
    def renew_before_seconds(self) -> float:
        if self.renew_before is None:
            return self.validity_seconds / 3
        return duration_seconds(self.renew_before)

    @property
    def ca_validity_seconds(self) -> float:
        return duration_seconds(self.ca_validity)


@frozen
class IssuerRef:
    """spec.security.tls.issuerRef: a cert-manager Issuer or ClusterIssuer that issues and renews
    the cluster's certificates from Certificate objects the supervisor makes (Kubernetes only)."""

    name: str
    kind: str = "Issuer"  # or ClusterIssuer
    group: str = "cert-manager.io"

    def __str__(self) -> str:
        return f"cert-manager {self.kind} {self.name}"


@frozen
class HealthSpec:
    # A running member that answers no probe this long is restarted, then replaced.
    unresponsive_after: str = DEFAULT_UNRESPONSIVE_AFTER

    @property
    def unresponsive_after_seconds(self) -> float:
        return duration_seconds(self.unresponsive_after)


# --- object stores (spec.backup.store, spec.restore.store) -----------------------------------


@frozen
class LocalStore:
    """A directory (locally: a relative path resolves against the manifest file's directory)."""

    path: str

    def describe(self) -> str:
        return f"local directory {self.path}"


@frozen
class S3Store:
    bucket: str
    prefix: str = ""  # prepended to every key by the store
    endpoint: str | None = None  # S3-compatible servers (MinIO, ...); None: AWS
    region: str | None = None
    credentials_secret: str | None = None

    def describe(self) -> str:
        return f"s3 bucket {self.bucket!r}" + (f" at {self.endpoint}" if self.endpoint else "")


@frozen
class GcsStore:
    bucket: str
    prefix: str = ""
    endpoint: str | None = None
    credentials_secret: str | None = None

    def describe(self) -> str:
        return f"gcs bucket {self.bucket!r}" + (f" at {self.endpoint}" if self.endpoint else "")


@frozen
class AzureStore:
    container: str
    prefix: str = ""
    # The blob service's URL with the account: Azurite's http://host:10000/devstoreaccount1, a
    # private endpoint; None: https://<account>.blob.core.windows.net.
    endpoint: str | None = None
    credentials_secret: str | None = None

    def describe(self) -> str:
        return f"azure container {self.container!r}" + (f" at {self.endpoint}" if self.endpoint else "")


@frozen
class StoreSpec:
    """Where backups go: exactly one of local, s3, gcs, azure (codec.parse_store enforces it)."""

    local: LocalStore | None = None
    s3: S3Store | None = None
    gcs: GcsStore | None = None
    azure: AzureStore | None = None

    @property
    def chosen(self) -> LocalStore | S3Store | GcsStore | AzureStore:
        for store in (self.local, self.s3, self.gcs, self.azure):
            if store is not None:
                return store
        raise ValueError("a StoreSpec names no store")

    def describe(self) -> str:
        return self.chosen.describe()


@frozen
class RetentionSpec:
    """Both apply when both are set; the newest verified backup is never deleted."""

    keep: int | None = None
    max_age: str | None = None  # a Go duration, e.g. 168h


class Compression(enum.StrEnum):
    """How a backup's bytes are compressed before they are stored (and encrypted)."""

    NONE = "none"
    ZSTD = "zstd"


@frozen
class EncryptionSpec:
    """Client-side AES-256-GCM of every backup object (actors/backup/envelope.py). The keys are
    a Secret's (locally: a file's next to the manifest) `key` (the current one, which encrypts)
    and any other names (older keys, which only decrypt)."""

    key_secret: str


@frozen
class BackupSpec:
    schedule: str | None = None  # 5-field cron, UTC; None: on-demand backups only
    retention: RetentionSpec = field(factory=RetentionSpec)
    # Restore each backup into a scratch member and compare HashKV before calling it verified.
    verify: bool = True
    store: StoreSpec | None = None
    # Between full backups, every change is written to the store in chunks this often (a Go
    # duration); None: full backups only.
    delta_period: str | None = None
    # None: objects are stored unencrypted (old encrypted ones still need the keys to restore).
    encryption: EncryptionSpec | None = None
    compression: Compression = Compression.ZSTD
    # A second store every successful backup is copied to and verified in; None: one store only.
    copy_to: CopySpec | None = None
    # Lock every backup object this long (S3 object lock); None: retention may delete any.
    immutable: ImmutableSpec | None = None


@frozen
class CopySpec:
    """spec.backup.copyTo: the second site (actors/backup/copies.py)."""

    store: StoreSpec


@frozen
class ImmutableSpec:
    """spec.backup.immutable: objects cannot be deleted or overwritten for `days` after their put,
    by anyone, the supervisor's own credentials included (S3 object lock in COMPLIANCE mode)."""

    days: int


@frozen
class RestoreSpec:
    """A new cluster's data from a backup: read once, when the cluster is created."""

    backup_name: str | None = None  # an EtcdBackup in the same namespace, or:
    store: StoreSpec | None = None  # a store and
    key: str | None = None  # the snapshot object's key in it
    revision: int | None = None  # point in time (needs incremental backups)

    def describe(self) -> str:
        what = f"EtcdBackup {self.backup_name}" if self.backup_name else f"backup {self.key}"
        return what if self.revision is None else f"{what} at revision {self.revision}"


class PermissionType(enum.StrEnum):
    READ = "read"
    WRITE = "write"
    READWRITE = "readwrite"


@frozen
class Permission:
    """One key (or, with prefix, every key under it) a role may read, write or both."""

    type: PermissionType
    key: str
    prefix: bool = False


@frozen
class RoleSpec:
    name: str
    permissions: tuple[Permission, ...] = ()


@frozen
class UserSpec:
    name: str
    roles: tuple[str, ...] = ()
    # A Secret (locally: <state-dir>/<ns>/<cluster>/users/<user>/) the supervisor writes the
    # user's client certificate to (CN = the user's name: etcd's user for the certificate).
    client_cert_secret: str | None = None
    # A Secret (locally: a file next to the manifest) whose key `password` is the user's
    # password; None: the user has none (certificate only).
    password_secret: str | None = None


@frozen
class AuthSpec:
    """spec.security.auth: etcd's own users and roles, reconciled from the spec."""

    enabled: bool = False
    users: tuple[UserSpec, ...] = ()
    roles: tuple[RoleSpec, ...] = ()


@frozen
class AdoptSpec:
    """spec.adopt: take over a running etcd cluster, read while the cluster is created.

    New members join the old cluster as learners and are promoted; with remove_old, the old
    members then leave its membership one at a time (leadership moved off them first)."""

    endpoints: tuple[str, ...]  # client URLs of the old cluster's members
    # A Secret (locally: a directory next to the manifest) with ca.crt, tls.crt, tls.key for the
    # old cluster's clients; None: the old cluster serves plain HTTP.
    client_secret: str | None = None
    # A Secret (locally: a directory) with ca.crt, ca.key: the old cluster's peer CA, which signs
    # the new members' peer certificates so the old members trust them. None: plain peers.
    peer_ca_secret: str | None = None
    remove_old: bool = False  # opt-in: removing members is the one step that cannot be undone

    @property
    def tls(self) -> bool:
        return self.client_secret is not None


# --- maintenance (spec.maintenance) ----------------------------------------------------------

# etcd's own backend quota when none is set (--quota-backend-bytes=0 means this).
DEFAULT_QUOTA_BYTES = 2 * 1024**3
DEFAULT_FRAGMENTATION_RATIO = 0.5
DEFAULT_MIN_RECLAIM = "64Mi"
_QUANTITY_UNITS = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")


def quantity_bytes(text: str) -> int:
    """Bytes in a Kubernetes quantity such as 8Gi or 500M; ValueError when it is not one."""
    found = _QUANTITY.match(text)
    if not found:
        raise ValueError(f"not a quantity such as 8Gi or 500M: {text!r}")
    return int(float(found.group(1)) * _QUANTITY_UNITS[found.group(2) or ""])


class CompactionMode(enum.StrEnum):
    """etcd's --auto-compaction-mode: keep a time window, or a number of revisions."""

    PERIODIC = "periodic"
    REVISION = "revision"


@frozen
class AutoCompactionSpec:
    mode: CompactionMode = CompactionMode.PERIODIC
    # periodic: a Go duration (1h); revision: how many revisions to keep ("10000").
    retention: str = "1h"


@frozen
class DefragSpec:
    """When members are defragmented: on a schedule, and whenever enough space is reclaimable."""

    schedule: str | None = None  # 5-field cron, UTC
    # Defragment a member when this share of its database file is free and at least
    # min_reclaim bytes would be given back.
    fragmentation_ratio: float = DEFAULT_FRAGMENTATION_RATIO
    min_reclaim: str = DEFAULT_MIN_RECLAIM


@frozen
class MaintenanceSpec:
    defrag: DefragSpec | None = None  # None: defragment only to recover from NOSPACE
    auto_compaction: AutoCompactionSpec | None = None  # None: etcd keeps all history until compacted
    quota_backend_bytes: str | None = None  # a quantity (8Gi); None: etcd's default, 2 GiB

    @property
    def quota_bytes(self) -> int:
        return quantity_bytes(self.quota_backend_bytes) if self.quota_backend_bytes else DEFAULT_QUOTA_BYTES


class RecoveryMode(enum.StrEnum):
    """What happens when a majority of voters is gone for good (see actors/plan/recovery.py)."""

    MANUAL = "Manual"  # report and wait for a person
    AUTOMATIC = "Automatic"  # rebuild from the most advanced survivor, or from the newest backup


@frozen
class DisasterRecoverySpec:
    mode: RecoveryMode = RecoveryMode.MANUAL


@frozen
class PodMetadata:
    """spec.podTemplate.metadata: labels and annotations added to every member pod (none of the
    ones the supervisor selects or records by: actors/pod_template.py)."""

    labels: Mapping[str, str] = field(factory=dict)
    annotations: Mapping[str, str] = field(factory=dict)


@frozen
class PodSettings:
    """spec.podTemplate.spec: the pod settings a user may give member pods, as Kubernetes
    writes them (the codec checked their shape). Placement and identity only: the containers,
    volumes and names are the supervisor's."""

    affinity: Mapping[str, Any] = field(factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(factory=dict)
    topology_spread_constraints: tuple[Mapping[str, Any], ...] = ()
    priority_class_name: str | None = None
    # Names of Secrets in the cluster's namespace (imagePullSecrets[].name).
    image_pull_secrets: tuple[str, ...] = ()
    security_context: Mapping[str, Any] = field(factory=dict)
    runtime_class_name: str | None = None


@frozen
class PodTemplate:
    """spec.podTemplate, merged into every member pod on Kubernetes (supervisor/kube/pod_template.py);
    the local runtime has no pods and reports it as ignored."""

    metadata: PodMetadata = field(factory=PodMetadata)
    spec: PodSettings = field(factory=PodSettings)

    @property
    def is_set(self) -> bool:
        return self != PodTemplate()


@frozen
class ClusterSpec:
    """spec of an EtcdCluster, defaults applied (the CRD schema applies the same ones)."""

    size: int = DEFAULT_SIZE
    version: str = DEFAULT_VERSION
    repository: str = DEFAULT_REPOSITORY
    storage: StorageSpec = field(factory=StorageSpec)
    tls_enabled: bool = True
    certificates: CertificatesSpec = field(factory=CertificatesSpec)
    # spec.security.tls.secretRef.name: certificates the user brings in a Secret of their own
    # (ca.crt, server.crt/key, peer.crt/key, client.crt/key); None: generated ones.
    tls_secret: str | None = None
    # spec.security.tls.issuerRef: certificates from cert-manager (Kubernetes only; locally it
    # is accepted and ignored, generated certificates are used).
    tls_issuer: IssuerRef | None = None
    resources: ResourceSpec = field(factory=ResourceSpec)
    # spec.etcdOptions: extra etcd flags (name without dashes -> value), passed to every member.
    etcd_options: Mapping[str, str] = field(factory=dict)
    # spec.podTemplate: labels, annotations and placement merged into member pods (Kubernetes only).
    pod_template: PodTemplate = field(factory=PodTemplate)
    # Opt-in network-debugging sidecar (nicolaka/netshoot); never on by default.
    debug_sidecar: bool = False
    health: HealthSpec = field(factory=HealthSpec)
    backup: BackupSpec | None = None
    restore: RestoreSpec | None = None
    maintenance: MaintenanceSpec = field(factory=MaintenanceSpec)
    disaster_recovery: DisasterRecoverySpec = field(factory=DisasterRecoverySpec)
    # spec.hibernate: a final backup (with spec.backup), then every member stopped, data kept;
    # false again wakes the members from their data (or from that backup when the data is gone).
    hibernate: bool = False
    # spec.adopt: the running cluster this one takes over (None: a new cluster of its own).
    adopt: AdoptSpec | None = None
    auth: AuthSpec = field(factory=AuthSpec)
    # spec.security.networkPolicy (Kubernetes only): a NetworkPolicy per cluster
    # (supervisor/kube/network_policy.py says what it admits).
    network_policy: bool = True
    # spec.security.clientSelector: a LabelSelector, as Kubernetes writes it (the codec checks
    # its fields); pods it selects, in any namespace, may reach the client port too.
    client_selector: Mapping[str, Any] | None = None

    @property
    def image_family(self) -> ImageFamily:
        return ImageFamily.BITNAMI if "bitnami/" in self.repository else ImageFamily.OFFICIAL

    @property
    def image(self) -> str:
        tag = self.version if self.image_family is ImageFamily.BITNAMI else f"v{self.version}"
        return f"{self.repository}:{tag}"


@frozen
class ClusterResource:
    """One EtcdCluster as read from Kubernetes or a local YAML file."""

    ref: ClusterRef
    spec: ClusterSpec
    generation: int = 1
    uid: str = ""
    # The members its status listed when read (Kubernetes keeps the status with the resource):
    # a cluster that had members and now has no pod and no volume at all lost its data, and
    # must not be seeded afresh as if it were new (plan/bootstrap.py).
    recorded_members: tuple[str, ...] = ()
    # metadata.annotations["etcd.io/rotate-ca"]: a value not acted on yet starts a CA rotation.
    rotate_ca: str = ""
    # metadata.annotations["etcd.io/suspend"] == "true": no step is taken (a maintenance window).
    suspended: bool = False
    # status.phase when the resource was read ("" locally, where the manifest carries no status):
    # a cluster hibernated when a daemon started is woken as one (plan/hibernate.py).
    recorded_phase: str = ""


# --- status -------------------------------------------------------------------------------


class Phase(enum.StrEnum):
    CREATING = "Creating"
    RUNNING = "Running"
    SCALING = "Scaling"
    FAILED = "Failed"
    RECOVERING = "Recovering"
    SUSPENDED = "Suspended"
    HIBERNATED = "Hibernated"


class Role(enum.StrEnum):
    LEADER = "leader"
    FOLLOWER = "follower"
    LEARNER = "learner"
    UNKNOWN = "unknown"


@frozen
class Condition:
    """A Kubernetes-style condition: type, status "True"/"False"/"Unknown", reason, message."""

    type: str
    status: str
    reason: str
    message: str = ""
    last_transition_time: float = 0.0  # unix seconds; set by the status writer when status flips


@frozen
class MemberStatus:
    name: str
    id: str  # hex, as etcdctl prints member IDs
    peer_url: str
    client_url: str
    role: Role = Role.UNKNOWN
    healthy: bool = False
    pid: int | None = None  # local runtime only
    db_size: int | None = None  # bytes of the member's database file (None: not answering)
    db_size_in_use: int | None = None  # bytes of it holding data; the rest is reclaimable
    version: str = ""  # the etcd version the member reports (its Status), "" while unknown


@frozen
class LastBackup:
    key: str
    revision: int
    size_bytes: int
    verified: bool
    completion_time: float  # unix seconds


@frozen
class BackupStatus:
    last_schedule_time: float | None = None  # unix seconds of the last scheduled attempt
    last_successful_backup: LastBackup | None = None
    consecutive_failures: int = 0


# --- EtcdBackup: an on-demand backup of one cluster ---------------------------------------------

BACKUP_KIND = "EtcdBackup"


class BackupPhase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def finished(self) -> bool:
        """Succeeded and Failed are final: such a backup is never taken again."""
        return self in (BackupPhase.SUCCEEDED, BackupPhase.FAILED)


@frozen
class EtcdBackupSpec:
    cluster_name: str  # an EtcdCluster in the backup's namespace
    store: StoreSpec | None = None  # None: the cluster's spec.backup.store


@frozen
class EtcdBackupStatus:
    phase: BackupPhase = BackupPhase.PENDING
    key: str = ""  # the snapshot object's key in the store
    size_bytes: int = 0
    revision: int = 0
    sha256: str = ""
    verified: bool = False
    start_time: float | None = None  # unix seconds
    completion_time: float | None = None
    message: str = ""  # what happened, in a sentence (why it failed)


@frozen
class EtcdBackup:
    """One EtcdBackup resource, as read from Kubernetes or the local manifest file."""

    namespace: str
    name: str
    spec: EtcdBackupSpec
    status: EtcdBackupStatus = field(factory=EtcdBackupStatus)
    uid: str = ""

    @property
    def cluster(self) -> ClusterRef:
        return ClusterRef(self.namespace, self.spec.cluster_name)

    def with_status(self, status: EtcdBackupStatus) -> EtcdBackup:
        return evolve(self, status=status)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class RecoveryPath(enum.StrEnum):
    SURVIVOR = "Survivor"  # the most advanced surviving member, alone, then grown back
    BACKUP = "Backup"  # no member's data survived: the newest verified backup


@frozen
class LastRecovery:
    """The latest quorum-loss recovery: where the data came from and what may have been lost."""

    path: RecoveryPath
    source: str  # the surviving member's name, or the backup's key
    revision: int  # the store revision the cluster was recovered to
    # The highest revision the supervisor had observed before the loss (0: unknown); above
    # `revision`, writes may have been lost.
    last_observed_revision: int
    time: float  # unix seconds


class RotationKind(enum.StrEnum):
    LEAF = "leaf"
    CA = "ca"


@frozen
class LastRotation:
    kind: RotationKind
    completion_time: float  # unix seconds


@frozen
class TlsStatus:
    """status.tls: when the certificates in use expire (unix seconds), and the last rotation."""

    ca_not_after: float
    leaf_not_after: float  # the earliest leaf's
    last_rotation: LastRotation | None = None


@frozen
class ClusterStatus:
    phase: Phase = Phase.CREATING
    ready_replicas: int = 0
    observed_generation: int = 0
    members: tuple[MemberStatus, ...] = ()
    conditions: tuple[Condition, ...] = ()
    # Why the phase is what it is, in a sentence (e.g. "quorum lost: 2 of 3 members down").
    message: str = ""
    backup: BackupStatus | None = None  # only for clusters with spec.backup
    last_recovery: LastRecovery | None = None
    # The cluster version: what every member speaks, MAJOR.MINOR.0 ("" while unknown).
    version: str = ""
    # The largest member database file as a quantity ("180.2Mi"): what the quota is measured
    # against, for `kubectl get -o wide` ("" while no member reported one).
    db_size: str = ""
    tls: TlsStatus | None = None  # TLS clusters, once their certificates were read


# --- what the member runtime reports ---------------------------------------------------------


class ProcessState(enum.StrEnum):
    """Where a member's process (or pod) stands, as its runtime sees it."""

    ABSENT = "absent"  # never started, or deleted
    STARTING = "starting"  # launched, not yet known to serve
    RUNNING = "running"
    EXITED = "exited"  # stopped or crashed; data may still be there


@frozen
class MemberUrls:
    peer_url: str
    client_url: str


@frozen
class RuntimeMember:
    """A member as its runtime knows it: identity, addresses, process and data state."""

    name: str
    urls: MemberUrls
    state: ProcessState
    has_data: bool  # a data directory / volume with etcd's member/ tree exists
    pid: int | None = None
    # Exits since the member last ran healthily; a crash loop suggests corrupt data.
    consecutive_failures: int = 0
    exit_code: int | None = None
    # The last error etcd logged before its latest exit ("" when unknown), for the status.
    last_error: str = ""
    # The member configuration its process was last started with (MemberConfig.fingerprint);
    # "" when unknown (started by an older daemon): a rolling restart brings it in step.
    config: str = ""
    # Its deletion is under way, and nothing is left to do but wait: a pod's grace period and a
    # claim's protection finalizer keep a deleted member listed for a while.
    deleting: bool = False
    # Its node does not act on it (Kubernetes: a pod's stop unconfirmed well past its grace
    # period, or a pod given to a node long ago that never got an address): the node is down or
    # cut off, and a process may run on out of reach.
    stranded: bool = False
    # Why it cannot be placed (Kubernetes: the scheduler's message on a pod it marked
    # Unschedulable, "0/3 nodes are available: ..."); "" when placed or not tried yet.
    unschedulable: str = ""
    # The trust digest of the CA material it was started with ("" when unknown): see MemberConfig.
    trust: str = ""
    # The volume it was made with (Kubernetes: its claim's requested size and storageClassName);
    # None where the runtime has no volumes (locally) or does not know: never replaced for storage.
    volume: StorageSpec | None = None


@frozen
class Vanished:
    """Members deleted in a row because etcd no longer listed them (something outside removed
    each new member, or adds keep half-happening): the last one's name, how many, and how long
    ago the last was deleted."""

    name: str
    times: int
    ago: float


def exit_story(r: RuntimeMember) -> str:
    """ "exited with code 1 (etcd: ...)": what the status and Events say about a stopped member."""
    if r.exit_code is not None:
        story = f"exited with code {r.exit_code}"
    else:  # still waiting to start (an image that cannot be pulled), or gone without a code
        story = "cannot start" if r.state is ProcessState.STARTING else "exited"
    if r.last_error:
        story += f" ({r.last_error})"
    if r.consecutive_failures > 1:
        story += f", {r.consecutive_failures} times in a row"
    return story


@frozen
class MemberConfig:
    """What a runtime would start members of a spec with: a fingerprint of everything whose
    change needs a restart (the etcd version or image, restart-only flags), and why the runtime
    cannot run it now ("" when it can), e.g. an etcd version that is not installed."""

    fingerprint: str
    unavailable: str = ""
    # The trust digest of the cluster's CA material (pki.trust_digest; "" with TLS off or not
    # read yet): a member started with another one is restarted to take it. A member whose digest
    # is unknown (started before digests were kept) only when a CA rotation is under way.
    trust: str = ""
    rotating_ca: bool = False
    # Fields of the spec this runtime accepts but does not apply (the local runtime: spec.podTemplate),
    # reported by the condition SpecIgnored; () when it applies them all.
    ignored: tuple[str, ...] = ()


@frozen
class MemberLaunch:
    """Everything a runtime needs to start one etcd member."""

    cluster: ClusterRef
    name: str
    urls: MemberUrls
    # name -> peer URL of every member etcd should know at start, this one included.
    initial_cluster: tuple[tuple[str, str], ...]
    # "new" only for the seed of a brand-new cluster; "existing" for every member added later.
    initial_cluster_state: str
    spec: ClusterSpec
    # Start this once as a one-member cluster from its own data (etcd's --force-new-cluster):
    # quorum-loss recovery from a survivor. Never set on a later start of the same member.
    force_new_cluster: bool = False

    def initial_cluster_flag(self) -> str:
        return ",".join(f"{name}={url}" for name, url in self.initial_cluster)


@frozen
class EtcdMember:
    """A member as etcd's membership list has it. A learner not yet started has no name."""

    id: int
    name: str
    peer_urls: tuple[str, ...]
    client_urls: tuple[str, ...]
    is_learner: bool


@frozen
class MemberHealth:
    """One member's answer to a Status call."""

    member_id: int
    leader_id: int
    raft_index: int
    raft_applied_index: int
    is_learner: bool
    db_size: int
    errors: tuple[str, ...] = ()
    db_size_in_use: int = 0
    # Alarms raised in the cluster, as this member reports them ("NOSPACE"). Not errors: a
    # member under the NOSPACE alarm is healthy, it only refuses writes.
    alarms: tuple[str, ...] = ()
    version: str = ""  # the etcd server version, "3.5.17"
    # The cluster version a downgrade was enabled towards ("3.5.0"; etcd 3.6+), "" when none is.
    downgrade_target: str = ""
    storage_version: str = ""  # the version its data is kept in ("3.6.0"; etcd 3.6+)
    # The cluster version etcd reports ("3.5.0"; its HTTP /version): asked of the leader only.
    cluster_version: str = ""

    @property
    def reclaimable(self) -> int:
        return max(self.db_size - self.db_size_in_use, 0) if self.db_size_in_use else 0

    revision: int = 0  # the member's own store revision (what it has applied)


class AuthAnswer(enum.Enum):
    """What the cluster to adopt (spec.adopt) said when asked whether its etcd auth is on."""

    OFF = "off"
    ON = "on"
    # etcd refused the question for want of credentials: with auth off it answers anyone, so
    # only a cluster with auth on refuses.
    REFUSED = "refused"
    UNANSWERED = "unanswered"  # no member answered: nothing is known


@frozen
class OldAuth:
    """The cluster to adopt's answer about its auth, and etcd's words when it was not OFF or ON."""

    answer: AuthAnswer
    detail: str = ""


def member_name(cluster: ClusterRef, ordinal: int) -> str:
    """Members are named <cluster>-<ordinal>; ordinals are never reused, so a replacement is new."""
    return f"{cluster.name}-{ordinal}"


def member_ordinal(cluster: ClusterRef, name: str) -> int | None:
    prefix = f"{cluster.name}-"
    if not name.startswith(prefix):
        return None
    tail = name[len(prefix) :]
    return int(tail) if tail.isdigit() else None

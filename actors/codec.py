"""EtcdCluster documents <-> domain records.

The daemon's own reading of a resource: the CRD schema rejects what it can at `kubectl apply`,
and this applies the same rules to what reaches the daemon another way (a local YAML file, an
object stored before the CRD was tightened). Every rule broken is reported with the field's
path and the rule, never just the first one, and nothing is silently changed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import yaml
from attrs import frozen

from actors.model import (
    API_GROUP,
    API_VERSION,
    BACKUP_KIND,
    DEFAULT_FRAGMENTATION_RATIO,
    DEFAULT_MIN_RECLAIM,
    DEFAULT_REPOSITORY,
    DEFAULT_SIZE,
    DEFAULT_STORAGE_SIZE,
    DEFAULT_UNRESPONSIVE_AFTER,
    DEFAULT_VERSION,
    DURATION_PATTERN,
    KIND,
    MAX_SIZE,
    MIN_SIZE,
    AutoCompactionSpec,
    BackupPhase,
    BackupSpec,
    BackupStatus,
    ClusterRef,
    ClusterResource,
    ClusterSpec,
    ClusterStatus,
    CompactionMode,
    Condition,
    DefragSpec,
    DisasterRecoverySpec,
    EtcdBackup,
    EtcdBackupSpec,
    EtcdBackupStatus,
    GcsStore,
    HealthSpec,
    LastRecovery,
    LocalStore,
    MaintenanceSpec,
    MemberStatus,
    ReclaimPolicy,
    RecoveryMode,
    ResourceSpec,
    RestoreSpec,
    RetentionSpec,
    S3Store,
    StorageSpec,
    StoreSpec,
    duration_seconds,
)
from actors.schedule import valid_schedule

# The same rules as the CRD's CEL (tests/unit/test_codec.py keeps them identical): a release
# or pre-release version without a leading "v", and a repository without tag or digest.
VERSION_PATTERN = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$")
REPOSITORY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$")
# A Kubernetes quantity that makes sense for a volume: positive, with an optional binary or
# decimal suffix (e.g. 10Gi, 500M, 1073741824).
QUANTITY_PATTERN = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
# Member names are <cluster>-<ordinal> and become DNS labels, which cap at 63 characters.
NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME_LENGTH = 50


@frozen
class SpecError:
    """One broken rule: where (a dotted path) and which rule."""

    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}"


@frozen
class DocumentError:
    """A document that could not become a ClusterResource, and every reason why."""

    index: int  # position in a multi-document file, from 0
    name: str  # namespace/name when the metadata was readable, else ""
    errors: tuple[SpecError, ...]
    kind: str = KIND  # EtcdBackup when the document said so, else taken for an EtcdCluster

    def __str__(self) -> str:
        where = f"document {self.index}" + (f" ({self.name})" if self.name else "")
        return f"{where}: " + "; ".join(str(e) for e in self.errors)


class InvalidDocument(ValueError):
    """A document that breaks rules: every one of them, by field."""

    def __init__(self, errors: tuple[SpecError, ...]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


class InvalidCluster(InvalidDocument):
    pass


class _Reader:
    """Walks a document, collecting errors instead of stopping at the first."""

    def __init__(self) -> None:
        self.errors: list[SpecError] = []

    def fail(self, field: str, rule: str) -> None:
        self.errors.append(SpecError(field, rule))

    def mapping(self, doc: Mapping[str, Any], key: str, path: str, allowed: set[str]) -> Mapping[str, Any]:
        value = doc.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(path, "must be an object")
            return {}
        for unknown in sorted(set(value) - allowed):
            self.fail(f"{path}.{unknown}", "unknown field")
        return value

    def string(self, doc: Mapping[str, Any], key: str, path: str, default: str | None) -> str | None:
        value = doc.get(key, default)
        if value is None or isinstance(value, str):
            return value
        self.fail(path, f"must be a string (got {value!r})")
        return default

    def boolean(self, doc: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        value = doc.get(key, default)
        if isinstance(value, bool):
            return value
        self.fail(path, f"must be true or false (got {value!r})")
        return default

    def string_map(self, doc: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
        value = doc.get(key) or {}
        if not isinstance(value, Mapping):
            self.fail(path, "must be an object of strings")
            return {}
        out = {}
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, str | int | float):
                self.fail(f"{path}.{k}", f"must be a quantity string (got {v!r})")
            else:
                out[str(k)] = str(v)
        return out


SPEC_FIELDS = {
    "size",
    "version",
    "repository",
    "storage",
    "security",
    "resources",
    "debug",
    "health",
    "backup",
    "maintenance",
    "restore",
    "disasterRecovery",
}


def parse_spec(spec: Mapping[str, Any], reader: _Reader | None = None) -> ClusterSpec:
    r = reader or _Reader()
    for unknown in sorted(set(spec) - SPEC_FIELDS):
        r.fail(f"spec.{unknown}", "unknown field")

    size = spec.get("size", DEFAULT_SIZE)
    if isinstance(size, bool) or not isinstance(size, int):
        r.fail("spec.size", f"must be an integer (got {size!r})")
        size = DEFAULT_SIZE
    elif not MIN_SIZE <= size <= MAX_SIZE:
        r.fail("spec.size", f"must be between {MIN_SIZE} and {MAX_SIZE} (got {size})")

    version = r.string(spec, "version", "spec.version", DEFAULT_VERSION) or ""
    if not VERSION_PATTERN.match(version):
        r.fail(
            "spec.version", f"must look like 3.5.21: MAJOR.MINOR.PATCH digits, no leading v (got {version!r})"
        )

    repository = r.string(spec, "repository", "spec.repository", DEFAULT_REPOSITORY) or ""
    if not REPOSITORY_PATTERN.match(repository):
        r.fail("spec.repository", f"must be an image repository without tag or digest (got {repository!r})")

    storage_doc = r.mapping(spec, "storage", "spec.storage", {"size", "storageClassName", "reclaimPolicy"})
    storage_size = r.string(storage_doc, "size", "spec.storage.size", DEFAULT_STORAGE_SIZE) or ""
    if not QUANTITY_PATTERN.match(storage_size) or float(re.sub(r"[^0-9.]", "", storage_size) or 0) <= 0:
        r.fail("spec.storage.size", f"must be a positive quantity such as 10Gi (got {storage_size!r})")
    reclaim = r.string(storage_doc, "reclaimPolicy", "spec.storage.reclaimPolicy", ReclaimPolicy.RETAIN.value)
    if reclaim not in {p.value for p in ReclaimPolicy}:
        r.fail("spec.storage.reclaimPolicy", f"must be Retain or Delete (got {reclaim!r})")
        reclaim = ReclaimPolicy.RETAIN.value
    storage = StorageSpec(
        size=storage_size,
        storage_class_name=r.string(storage_doc, "storageClassName", "spec.storage.storageClassName", None),
        reclaim_policy=ReclaimPolicy(reclaim),
    )

    security = r.mapping(spec, "security", "spec.security", {"tls"})
    tls = r.mapping(security, "tls", "spec.security.tls", {"enabled"})
    resources_doc = r.mapping(spec, "resources", "spec.resources", {"requests", "limits"})
    debug = r.mapping(spec, "debug", "spec.debug", {"networkSidecar"})
    health = r.mapping(spec, "health", "spec.health", {"unresponsiveAfter"})

    return ClusterSpec(
        size=size,
        version=version,
        repository=repository,
        storage=storage,
        tls_enabled=r.boolean(tls, "enabled", "spec.security.tls.enabled", True),
        resources=ResourceSpec(
            requests=r.string_map(resources_doc, "requests", "spec.resources.requests"),
            limits=r.string_map(resources_doc, "limits", "spec.resources.limits"),
        ),
        debug_sidecar=r.boolean(debug, "networkSidecar", "spec.debug.networkSidecar", False),
        health=HealthSpec(unresponsive_after=_unresponsive_after(r, health)),
        backup=parse_backup(spec, r),
        restore=parse_restore(spec, r),
        maintenance=parse_maintenance(spec, r),
        disaster_recovery=_disaster_recovery(spec, r),
    )


def _disaster_recovery(spec: Mapping[str, Any], r: _Reader) -> DisasterRecoverySpec:
    doc = r.mapping(spec, "disasterRecovery", "spec.disasterRecovery", {"mode"})
    mode = r.string(doc, "mode", "spec.disasterRecovery.mode", RecoveryMode.MANUAL.value)
    if mode not in {m.value for m in RecoveryMode}:
        r.fail("spec.disasterRecovery.mode", f"must be Automatic or Manual (got {mode!r})")
        mode = RecoveryMode.MANUAL.value
    return DisasterRecoverySpec(mode=RecoveryMode(mode))


BACKUP_FIELDS = {"schedule", "deltaPeriod", "retention", "verify", "store"}


def parse_backup(spec: Mapping[str, Any], r: _Reader) -> BackupSpec | None:
    if spec.get("backup") is None:
        return None
    doc = r.mapping(spec, "backup", "spec.backup", BACKUP_FIELDS)
    schedule = r.string(doc, "schedule", "spec.backup.schedule", None)
    if schedule is not None and not valid_schedule(schedule):
        r.fail(
            "spec.backup.schedule",
            f"must be a 5-field cron schedule in UTC such as '0 */6 * * *' (got {schedule!r})",
        )
    delta_period = r.string(doc, "deltaPeriod", "spec.backup.deltaPeriod", None)
    if delta_period is not None and (
        not DURATION_PATTERN.match(delta_period) or duration_seconds(delta_period) < 1
    ):
        r.fail(
            "spec.backup.deltaPeriod", f"must be a duration of at least 1s such as 5m (got {delta_period!r})"
        )
        delta_period = None
    retention = r.mapping(doc, "retention", "spec.backup.retention", {"keep", "maxAge"})
    keep = retention.get("keep")
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
        r.fail("spec.backup.retention.keep", f"must be a whole number of at least 1 (got {keep!r})")
        keep = None
    max_age = r.string(retention, "maxAge", "spec.backup.retention.maxAge", None)
    if max_age is not None and (not DURATION_PATTERN.match(max_age) or duration_seconds(max_age) <= 0):
        r.fail("spec.backup.retention.maxAge", f"must be a duration such as 168h (got {max_age!r})")
        max_age = None
    store = None
    if doc.get("store") is None:
        r.fail("spec.backup.store", "required: where the backups go (one of local, s3, gcs)")
    else:
        store = parse_store(doc.get("store"), "spec.backup.store", r)
    return BackupSpec(
        schedule=schedule,
        retention=RetentionSpec(keep=keep, max_age=max_age),
        verify=r.boolean(doc, "verify", "spec.backup.verify", True),
        store=store,
        delta_period=delta_period,
    )


def parse_restore(spec: Mapping[str, Any], r: _Reader) -> RestoreSpec | None:
    if spec.get("restore") is None:
        return None
    doc = r.mapping(spec, "restore", "spec.restore", {"backupName", "store", "key", "revision"})
    name = r.string(doc, "backupName", "spec.restore.backupName", None)
    key = r.string(doc, "key", "spec.restore.key", None)
    has_store = doc.get("store") is not None
    if name is not None and (has_store or key is not None):
        r.fail("spec.restore", "name either backupName, or store and key: not both")
    elif name is None and not (has_store and key):
        r.fail("spec.restore", "needs backupName, or both store and key")
    if name is not None and not BACKUP_NAME_PATTERN.match(name):
        r.fail("spec.restore.backupName", f"must be an EtcdBackup's name, a DNS subdomain (got {name!r})")
    revision = doc.get("revision")
    if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int) or revision < 1):
        r.fail(
            "spec.restore.revision", f"must be a revision, a whole number of at least 1 (got {revision!r})"
        )
        revision = None
    store = parse_store(doc["store"], "spec.restore.store", r) if has_store else None
    return RestoreSpec(backup_name=name, store=store, key=key, revision=revision)


def parse_maintenance(spec: Mapping[str, Any], r: _Reader) -> MaintenanceSpec:
    doc = r.mapping(
        spec, "maintenance", "spec.maintenance", {"defrag", "autoCompaction", "quotaBackendBytes"}
    )
    quota = r.string(doc, "quotaBackendBytes", "spec.maintenance.quotaBackendBytes", None)
    if quota is not None and not _positive_quantity(quota):
        r.fail(
            "spec.maintenance.quotaBackendBytes", f"must be a positive quantity such as 8Gi (got {quota!r})"
        )
        quota = None
    return MaintenanceSpec(
        defrag=_defrag(doc, r) if doc.get("defrag") is not None else None,
        auto_compaction=_auto_compaction(doc, r) if doc.get("autoCompaction") is not None else None,
        quota_backend_bytes=quota,
    )


def _defrag(doc: Mapping[str, Any], r: _Reader) -> DefragSpec:
    where = "spec.maintenance.defrag"
    defrag = r.mapping(doc, "defrag", where, {"schedule", "fragmentationRatio", "minReclaim"})
    schedule = r.string(defrag, "schedule", f"{where}.schedule", None)
    if schedule is not None and not valid_schedule(schedule):
        r.fail(
            f"{where}.schedule",
            f"must be a 5-field cron schedule in UTC such as '0 3 * * *' (got {schedule!r})",
        )
        schedule = None
    ratio = defrag.get("fragmentationRatio", DEFAULT_FRAGMENTATION_RATIO)
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
        r.fail(f"{where}.fragmentationRatio", f"must be a number from 0 to 1 (got {ratio!r})")
        ratio = DEFAULT_FRAGMENTATION_RATIO
    reclaim = r.string(defrag, "minReclaim", f"{where}.minReclaim", DEFAULT_MIN_RECLAIM) or ""
    if not QUANTITY_PATTERN.match(reclaim):
        r.fail(f"{where}.minReclaim", f"must be a quantity such as 64Mi (got {reclaim!r})")
        reclaim = DEFAULT_MIN_RECLAIM
    return DefragSpec(schedule=schedule, fragmentation_ratio=float(ratio), min_reclaim=reclaim)


def _auto_compaction(doc: Mapping[str, Any], r: _Reader) -> AutoCompactionSpec:
    where = "spec.maintenance.autoCompaction"
    compaction = r.mapping(doc, "autoCompaction", where, {"mode", "retention"})
    mode = r.string(compaction, "mode", f"{where}.mode", CompactionMode.PERIODIC.value)
    if mode not in {m.value for m in CompactionMode}:
        r.fail(f"{where}.mode", f"must be periodic or revision (got {mode!r})")
        mode = CompactionMode.PERIODIC.value
    retention = compaction.get("retention", "1h")
    if mode == CompactionMode.REVISION and isinstance(retention, int) and not isinstance(retention, bool):
        retention = str(retention)  # YAML reads 10000 as a number; etcd's flag takes it as text
    if not isinstance(retention, str):
        r.fail(f"{where}.retention", f"must be a string (got {retention!r})")
        retention = "1h" if mode == CompactionMode.PERIODIC else "0"
    elif mode == CompactionMode.REVISION and not retention.isdigit():
        r.fail(
            f"{where}.retention", f"must be a whole number of revisions for mode revision (got {retention!r})"
        )
    elif mode == CompactionMode.PERIODIC and not DURATION_PATTERN.match(retention):
        r.fail(f"{where}.retention", f"must be a duration such as 1h for mode periodic (got {retention!r})")
    return AutoCompactionSpec(mode=CompactionMode(mode), retention=retention)


def _positive_quantity(text: str) -> bool:
    return bool(QUANTITY_PATTERN.match(text)) and float(re.sub(r"[^0-9.]", "", text) or 0) > 0


def _unresponsive_after(r: _Reader, health: Mapping[str, Any]) -> str:
    path = "spec.health.unresponsiveAfter"
    value = r.string(health, "unresponsiveAfter", path, DEFAULT_UNRESPONSIVE_AFTER) or ""
    if not DURATION_PATTERN.match(value) or duration_seconds(value) < 1:
        r.fail(path, f"must be a duration of at least 1s such as 30s or 2m (got {value!r})")
        return DEFAULT_UNRESPONSIVE_AFTER
    return value


# Bucket names as the stores define them: S3 3-63 of lowercase letters, digits, dots and
# hyphens; GCS also underscores (and up to 222 characters with dots, rare enough to refuse).
S3_BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
GCS_BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
# A Secret's name (a DNS subdomain); locally also the name of a file next to the manifest.
SECRET_NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
ENDPOINT_PATTERN = re.compile(r"^https?://[^\s/]+(/\S*)?$")
STORE_KINDS = ("local", "s3", "gcs")


def parse_store(doc: Any, path: str, reader: _Reader) -> StoreSpec | None:
    """A store object (`path` is where it sits, e.g. spec.backup.store) -> StoreSpec.

    None when a rule is broken; the reader then holds every broken rule.
    """
    if not isinstance(doc, Mapping):
        reader.fail(path, "must be an object with exactly one of local, s3, gcs")
        return None
    for unknown in sorted(set(doc) - set(STORE_KINDS)):
        reader.fail(f"{path}.{unknown}", "unknown field (a store is one of local, s3, gcs)")
    named = [kind for kind in STORE_KINDS if doc.get(kind) is not None]
    if len(named) != 1:
        got = ", ".join(named) if named else "none"
        reader.fail(path, f"must name exactly one store of local, s3, gcs (got {got})")
        return None
    kind = named[0]
    errors_before = len(reader.errors)
    where = f"{path}.{kind}"
    if kind == "local":
        store = StoreSpec(local=_local_store(doc, where, reader))
    elif kind == "s3":
        store = StoreSpec(s3=_s3_store(doc, where, reader))
    else:
        store = StoreSpec(gcs=_gcs_store(doc, where, reader))
    return store if len(reader.errors) == errors_before else None


def _local_store(doc: Mapping[str, Any], where: str, r: _Reader) -> LocalStore:
    fields = r.mapping(doc, "local", where, {"path"})
    path = r.string(fields, "path", f"{where}.path", None)
    if not path:
        r.fail(f"{where}.path", "required: the directory backups are written to")
    return LocalStore(path=path or "")


def _s3_store(doc: Mapping[str, Any], where: str, r: _Reader) -> S3Store:
    fields = r.mapping(doc, "s3", where, {"bucket", "prefix", "endpoint", "region", "credentialsSecret"})
    return S3Store(
        bucket=_bucket(fields, where, r, S3_BUCKET_PATTERN, "3-63 lowercase letters, digits, dots, hyphens"),
        prefix=_key_prefix(fields, where, r),
        endpoint=_endpoint(fields, where, r),
        region=r.string(fields, "region", f"{where}.region", None),
        credentials_secret=_secret_name(fields, where, r),
    )


def _gcs_store(doc: Mapping[str, Any], where: str, r: _Reader) -> GcsStore:
    fields = r.mapping(doc, "gcs", where, {"bucket", "prefix", "endpoint", "credentialsSecret"})
    return GcsStore(
        bucket=_bucket(fields, where, r, GCS_BUCKET_PATTERN, "3-63 lowercase letters, digits, ., _, -"),
        prefix=_key_prefix(fields, where, r),
        endpoint=_endpoint(fields, where, r),
        credentials_secret=_secret_name(fields, where, r),
    )


def _bucket(fields: Mapping[str, Any], where: str, r: _Reader, pattern: re.Pattern[str], rule: str) -> str:
    bucket = r.string(fields, "bucket", f"{where}.bucket", None)
    if bucket is None:
        r.fail(f"{where}.bucket", "required")
    elif not pattern.match(bucket):
        r.fail(f"{where}.bucket", f"must be a bucket name: {rule} (got {bucket!r})")
    return bucket or ""


def _key_prefix(fields: Mapping[str, Any], where: str, r: _Reader) -> str:
    prefix = r.string(fields, "prefix", f"{where}.prefix", "") or ""
    if prefix.startswith("/") or ".." in prefix.split("/"):
        r.fail(f"{where}.prefix", f"must be a relative key prefix such as etcd/ (got {prefix!r})")
    return prefix


def _endpoint(fields: Mapping[str, Any], where: str, r: _Reader) -> str | None:
    endpoint = r.string(fields, "endpoint", f"{where}.endpoint", None)
    if endpoint is not None and not ENDPOINT_PATTERN.match(endpoint):
        r.fail(f"{where}.endpoint", f"must be an http:// or https:// URL (got {endpoint!r})")
    return endpoint


def _secret_name(fields: Mapping[str, Any], where: str, r: _Reader) -> str | None:
    name = r.string(fields, "credentialsSecret", f"{where}.credentialsSecret", None)
    if name is not None and not SECRET_NAME_PATTERN.match(name):
        r.fail(f"{where}.credentialsSecret", f"must be a Secret name (a DNS subdomain) (got {name!r})")
    return name


def parse_cluster(doc: Any, *, default_namespace: str = "default") -> ClusterResource:
    """One EtcdCluster object (as YAML/JSON decoded) -> ClusterResource, or InvalidCluster."""
    r = _Reader()
    if not isinstance(doc, Mapping):
        raise InvalidCluster((SpecError("(document)", "must be an EtcdCluster object"),))
    meta = _header(doc, KIND, r)
    name = meta.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or len(name) > MAX_NAME_LENGTH:
        r.fail(
            "metadata.name",
            f"must be a DNS label of at most {MAX_NAME_LENGTH} characters (got {name!r})",
        )
        name = ""
    namespace = meta.get("namespace") or default_namespace
    spec_doc = doc.get("spec") or {}
    if not isinstance(spec_doc, Mapping):
        r.fail("spec", "must be an object")
        spec_doc = {}
    spec = parse_spec(spec_doc, r)
    if r.errors:
        raise InvalidCluster(tuple(r.errors))
    generation = meta.get("generation", 1)
    return ClusterResource(
        ref=ClusterRef(namespace=str(namespace), name=name),
        spec=spec,
        generation=generation if isinstance(generation, int) else 1,
        uid=str(meta.get("uid", "")),
        recorded_members=_recorded_members(doc.get("status")),
    )


def _recorded_members(status: Any) -> tuple[str, ...]:
    """The member names a status lists; nothing from a status that is not one (it is ours to
    write, so a malformed one is ignored rather than refused)."""
    members = status.get("members") if isinstance(status, Mapping) else None
    if not isinstance(members, list):
        return ()
    names = (m.get("name") for m in members if isinstance(m, Mapping))
    return tuple(sorted(n for n in names if isinstance(n, str) and n))


def _header(doc: Mapping[str, Any], kind: str, r: _Reader) -> Mapping[str, Any]:
    """Check apiVersion and kind; the metadata ({} when it is not an object)."""
    expected_api = f"{API_GROUP}/{API_VERSION}"
    if doc.get("apiVersion") != expected_api:
        r.fail("apiVersion", f"must be {expected_api} (got {doc.get('apiVersion')!r})")
    if doc.get("kind") != kind:
        r.fail("kind", f"must be {kind} (got {doc.get('kind')!r})")
    raw_meta = doc.get("metadata")
    return raw_meta if isinstance(raw_meta, Mapping) else {}


def parse_cluster_documents(text: str) -> list[ClusterResource | DocumentError]:
    """A multi-document YAML file of EtcdClusters -> one entry per non-empty document, in order."""
    return [d for d in parse_documents(text) if not isinstance(d, EtcdBackup)]


def parse_documents(text: str) -> list[ClusterResource | EtcdBackup | DocumentError]:
    """A multi-document YAML file -> one entry per non-empty document, in order: EtcdBackup
    documents (by their kind) become EtcdBackups, every other one an EtcdCluster."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        return [DocumentError(0, "", (SpecError("(file)", f"is not valid YAML: {exc}"),))]
    out: list[ClusterResource | EtcdBackup | DocumentError] = []
    for index, doc in enumerate(docs):
        kind = doc.get("kind") if isinstance(doc, Mapping) else None
        try:
            out.append(parse_etcd_backup(doc) if kind == BACKUP_KIND else parse_cluster(doc))
        except InvalidDocument as exc:
            meta = doc.get("metadata") if isinstance(doc, Mapping) else None
            name = ""
            if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
                name = f"{meta.get('namespace') or 'default'}/{meta['name']}"
            out.append(DocumentError(index, name, exc.errors, kind if kind == BACKUP_KIND else KIND))
    return out


def _condition_to_dict(c: Condition) -> dict[str, Any]:
    stamp = _rfc3339(c.last_transition_time)
    return {
        "type": c.type,
        "status": c.status,
        "reason": c.reason,
        "message": c.message,
        "lastTransitionTime": stamp,
    }


def conditions_from_dicts(items: Sequence[Mapping[str, Any]]) -> tuple[Condition, ...]:
    """Conditions as stored on an object back into records (unreadable times count as unset)."""
    out = []
    for item in items:
        when = _parse_rfc3339(item.get("lastTransitionTime")) or 0.0
        out.append(
            Condition(
                str(item.get("type", "")),
                str(item.get("status", "")),
                str(item.get("reason", "")),
                str(item.get("message", "")),
                when,
            )
        )
    return tuple(out)


def _member_to_dict(m: MemberStatus) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": m.name,
        "id": m.id,
        "peerURL": m.peer_url,
        "clientURL": m.client_url,
        "role": m.role.value,
        "healthy": m.healthy,
    }
    if m.pid is not None:
        out["pid"] = m.pid
    if m.db_size is not None:
        out["dbSize"] = m.db_size
    if m.db_size_in_use is not None:
        out["dbSizeInUse"] = m.db_size_in_use
    if m.version:
        out["version"] = m.version
    return out


def status_to_dict(status: ClusterStatus) -> dict[str, Any]:
    """ClusterStatus -> the EtcdCluster status object (camelCase, as the CRD declares it)."""
    out: dict[str, Any] = {
        "phase": status.phase.value,
        "readyReplicas": status.ready_replicas,
        "observedGeneration": status.observed_generation,
        "members": [_member_to_dict(m) for m in status.members],
        "conditions": [_condition_to_dict(c) for c in status.conditions],
        "message": status.message,
    }
    if status.version:
        out["version"] = status.version
    if status.db_size:
        out["dbSize"] = status.db_size
    if status.backup is not None:
        out["backup"] = _backup_to_dict(status.backup)
    if status.last_recovery is not None:
        out["lastRecovery"] = _recovery_to_dict(status.last_recovery)
    return out


def _recovery_to_dict(recovery: LastRecovery) -> dict[str, Any]:
    return {
        "path": recovery.path.value,
        "source": recovery.source,
        "revision": recovery.revision,
        "lastObservedRevision": recovery.last_observed_revision,
        "time": _rfc3339(recovery.time),
    }


def _backup_to_dict(backup: BackupStatus) -> dict[str, Any]:
    out: dict[str, Any] = {"consecutiveFailures": backup.consecutive_failures}
    if backup.last_schedule_time is not None:
        out["lastScheduleTime"] = _rfc3339(backup.last_schedule_time)
    last = backup.last_successful_backup
    if last is not None:
        out["lastSuccessfulBackup"] = {
            "key": last.key,
            "revision": last.revision,
            "sizeBytes": last.size_bytes,
            "verified": last.verified,
            "completionTime": _rfc3339(last.completion_time),
        }
    return out


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- EtcdBackup ------------------------------------------------------------------------------

# Kubernetes allows a DNS subdomain; locally the name also becomes <name>.json.
BACKUP_NAME_PATTERN = SECRET_NAME_PATTERN


class InvalidBackup(InvalidDocument):
    pass


def parse_etcd_backup(doc: Any, *, default_namespace: str = "default") -> EtcdBackup:
    """One EtcdBackup object -> EtcdBackup (its status too, when it has one), or InvalidBackup."""
    r = _Reader()
    if not isinstance(doc, Mapping):
        raise InvalidBackup((SpecError("(document)", "must be an EtcdBackup object"),))
    meta = _header(doc, BACKUP_KIND, r)
    name = meta.get("name")
    if not isinstance(name, str) or not BACKUP_NAME_PATTERN.match(name):
        r.fail(
            "metadata.name", f"must be a DNS subdomain: lowercase letters, digits, '-' and '.' (got {name!r})"
        )
        name = ""
    spec_doc = r.mapping(doc, "spec", "spec", {"clusterName", "store"})
    cluster_name = r.string(spec_doc, "clusterName", "spec.clusterName", None)
    if cluster_name is None:
        r.fail("spec.clusterName", "required: the EtcdCluster (in the same namespace) to back up")
    elif not NAME_PATTERN.match(cluster_name):
        r.fail("spec.clusterName", f"must be an EtcdCluster's name, a DNS label (got {cluster_name!r})")
    store = parse_store(spec_doc["store"], "spec.store", r) if spec_doc.get("store") is not None else None
    if r.errors:
        raise InvalidBackup(tuple(r.errors))
    raw_status = doc.get("status")
    return EtcdBackup(
        namespace=str(meta.get("namespace") or default_namespace),
        name=name,
        spec=EtcdBackupSpec(cluster_name=cluster_name or "", store=store),
        status=backup_status_from_dict(raw_status) if isinstance(raw_status, Mapping) else EtcdBackupStatus(),
        uid=str(meta.get("uid", "")),
    )


def backup_status_to_dict(status: EtcdBackupStatus) -> dict[str, Any]:
    """EtcdBackupStatus -> the EtcdBackup status object (camelCase, as the CRD declares it)."""
    out: dict[str, Any] = {"phase": status.phase.value, "message": status.message}
    if status.key:
        out |= {
            "key": status.key,
            "sizeBytes": status.size_bytes,
            "revision": status.revision,
            "sha256": status.sha256,
            "verified": status.verified,
        }
    if status.start_time is not None:
        out["startTime"] = _rfc3339(status.start_time)
    if status.completion_time is not None:
        out["completionTime"] = _rfc3339(status.completion_time)
    return out


def backup_status_from_dict(doc: Mapping[str, Any]) -> EtcdBackupStatus:
    """A stored status back into a record. Lenient: it was written by us (or by hand), and a
    field that cannot be read counts as unset rather than failing the backup's whole object."""
    try:
        phase = BackupPhase(str(doc.get("phase")))
    except ValueError:
        phase = BackupPhase.PENDING
    return EtcdBackupStatus(
        phase=phase,
        key=_text(doc.get("key")),
        size_bytes=_whole(doc.get("sizeBytes")),
        revision=_whole(doc.get("revision")),
        sha256=_text(doc.get("sha256")),
        verified=doc.get("verified") is True,
        start_time=_parse_rfc3339(doc.get("startTime")),
        completion_time=_parse_rfc3339(doc.get("completionTime")),
        message=_text(doc.get("message")),
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _whole(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _parse_rfc3339(value: Any) -> float | None:
    try:
        return datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None

"""An EtcdCluster's spec -> ClusterSpec: every field, its defaults and its rules (backup,
restore, adoption, maintenance, health and disaster recovery included; stores in stores.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from actors.codec.auth import parse_auth
from actors.codec.fields import (
    CLIENT_URL_PATTERN,
    QUANTITY_PATTERN,
    REPOSITORY_PATTERN,
    SECRET_NAME_PATTERN,
    VERSION_PATTERN,
    Reader,
    secret_name,
)
from actors.codec.label_selector import parse_label_selector
from actors.codec.pod_template import parse_pod_template
from actors.codec.second_site import parse_copy_to, parse_immutable
from actors.codec.stores import BACKUP_NAME_PATTERN, parse_store
from actors.etcd_flags import FEATURE_GATES, FLAGS, OWNED, OWNED_GATES, REPLACED
from actors.model import (
    DEFAULT_CA_VALIDITY,
    DEFAULT_CERT_VALIDITY,
    DEFAULT_FRAGMENTATION_RATIO,
    DEFAULT_MIN_RECLAIM,
    DEFAULT_REPOSITORY,
    DEFAULT_SIZE,
    DEFAULT_STORAGE_SIZE,
    DEFAULT_UNRESPONSIVE_AFTER,
    DEFAULT_VERSION,
    DURATION_PATTERN,
    MAX_SIZE,
    MIN_CERT_VALIDITY_SECONDS,
    MIN_SIZE,
    AdoptSpec,
    AuthSpec,
    AutoCompactionSpec,
    BackupSpec,
    CertificatesSpec,
    ClusterSpec,
    CompactionMode,
    Compression,
    DefragSpec,
    DisasterRecoverySpec,
    EncryptionSpec,
    HealthSpec,
    IssuerRef,
    MaintenanceSpec,
    ReclaimPolicy,
    RecoveryMode,
    ResourceSpec,
    RestoreSpec,
    RetentionSpec,
    StorageSpec,
    duration_seconds,
)
from actors.schedule import valid_schedule

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
    "etcdOptions",
    "podTemplate",
    "hibernate",
    "adopt",
}


def parse_spec(spec: Mapping[str, Any], reader: Reader | None = None) -> ClusterSpec:
    r = reader or Reader()
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

    storage = _storage(spec, r)

    security = _security(spec, r)
    tls = r.mapping(
        security, "tls", "spec.security.tls", {"enabled", "certificates", "secretRef", "issuerRef"}
    )
    resources_doc = r.mapping(spec, "resources", "spec.resources", {"requests", "limits"})
    debug = r.mapping(spec, "debug", "spec.debug", {"networkSidecar"})
    health = r.mapping(spec, "health", "spec.health", {"unresponsiveAfter"})

    return ClusterSpec(
        size=size,
        version=version,
        repository=repository,
        storage=storage,
        tls_enabled=r.boolean(tls, "enabled", "spec.security.tls.enabled", True),
        certificates=_certificates(tls, r),
        tls_secret=_tls_secret(tls, r),
        tls_issuer=_tls_issuer(tls, r),
        etcd_options=_etcd_options(spec, version or DEFAULT_VERSION, r),
        pod_template=parse_pod_template(spec, r),
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
        hibernate=r.boolean(spec, "hibernate", "spec.hibernate", False),
        adopt=parse_adopt(spec, r),
        auth=_auth(security, tls, r),
        network_policy=r.boolean(security, "networkPolicy", "spec.security.networkPolicy", True),
        client_selector=parse_label_selector(security, "clientSelector", "spec.security.clientSelector", r),
    )


def _storage(spec: Mapping[str, Any], r: Reader) -> StorageSpec:
    storage_doc = r.mapping(spec, "storage", "spec.storage", {"size", "storageClassName", "reclaimPolicy"})
    storage_size = r.string(storage_doc, "size", "spec.storage.size", DEFAULT_STORAGE_SIZE) or ""
    if not QUANTITY_PATTERN.match(storage_size) or float(re.sub(r"[^0-9.]", "", storage_size) or 0) <= 0:
        r.fail("spec.storage.size", f"must be a positive quantity such as 10Gi (got {storage_size!r})")
    reclaim = r.string(storage_doc, "reclaimPolicy", "spec.storage.reclaimPolicy", ReclaimPolicy.RETAIN.value)
    if reclaim not in {p.value for p in ReclaimPolicy}:
        r.fail("spec.storage.reclaimPolicy", f"must be Retain or Delete (got {reclaim!r})")
        reclaim = ReclaimPolicy.RETAIN.value
    return StorageSpec(
        size=storage_size,
        storage_class_name=r.string(storage_doc, "storageClassName", "spec.storage.storageClassName", None),
        reclaim_policy=ReclaimPolicy(reclaim),
    )


CERTIFICATES = "spec.security.tls.certificates"
ETCD_OPTIONS = "spec.etcdOptions"
MAX_ETCD_OPTIONS = 32  # the CRD's maxProperties: it bounds the cost of its CEL rule


def _etcd_options(spec: Mapping[str, Any], version: str, r: Reader) -> dict[str, str]:
    """Extra etcd flags: known to the member's minor, not one the supervisor sets, a string."""
    doc = spec.get("etcdOptions") or {}
    if not isinstance(doc, Mapping):
        r.fail(ETCD_OPTIONS, "must be an object of flag names (without --) to string values")
        return {}
    if len(doc) > MAX_ETCD_OPTIONS:
        r.fail(ETCD_OPTIONS, f"may hold at most {MAX_ETCD_OPTIONS} flags (got {len(doc)})")
    minor = ".".join(version.split(".")[:2])
    known = FLAGS.get(minor)
    out = {}
    for flag, value in doc.items():
        name = str(flag)
        where = f"{ETCD_OPTIONS}.{name}"
        if name in OWNED:
            r.fail(where, f"cannot be set here: {OWNED[name]}")
        elif known is not None and name not in known:
            replaced = f": etcd {minor} removed it, use {REPLACED[name]}" if name in REPLACED else ""
            r.fail(
                where, f"is not a flag of etcd {minor}{replaced} (names are written without the leading --)"
            )
        elif not isinstance(value, str):
            r.fail(where, f"must be a string (got {value!r}): quote numbers and booleans")
        elif name == "feature-gates":
            if _feature_gates(value, minor, where, r):
                out[name] = value
        else:
            out[name] = value
    return out


def _feature_gates(value: str, minor: str, where: str, r: Reader) -> bool:
    """`Name=true|false,...`: gates of etcd `minor` (any name on a minor we have no list of) that
    the supervisor does not set itself. The supervisor adds its own to the same flag."""
    known = FEATURE_GATES.get(minor)
    ok = True
    seen: set[str] = set()
    for item in value.split(","):
        gate, sep, setting = (part.strip() for part in item.partition("="))
        if not sep or not gate or setting not in ("true", "false"):
            r.fail(where, f"{item.strip()!r} is not Name=true or Name=false (gates are separated by commas)")
        elif gate in OWNED_GATES:
            r.fail(where, f"{gate} cannot be set here: {OWNED_GATES[gate]}")
        elif known is not None and gate not in known:
            r.fail(where, f"{gate} is not a feature gate of etcd {minor} (it has {', '.join(sorted(known))})")
        elif gate in seen:
            r.fail(where, f"{gate} is given twice")
        else:
            seen.add(gate)
            continue
        ok = False
    return ok


def _security(spec: Mapping[str, Any], r: Reader) -> Mapping[str, Any]:
    return r.mapping(spec, "security", "spec.security", {"tls", "auth", "networkPolicy", "clientSelector"})


def _auth(security: Mapping[str, Any], tls: Mapping[str, Any], r: Reader) -> AuthSpec:
    auth = parse_auth(security, r)
    if auth.enabled and tls.get("enabled", True) is False:
        r.fail(
            "spec.security.auth.enabled",
            "needs spec.security.tls.enabled: the supervisor authenticates to etcd by its client certificate",
        )
    return auth


SECRET_REF = "spec.security.tls.secretRef"


def _tls_secret(tls: Mapping[str, Any], r: Reader) -> str | None:
    """secretRef's Secret name."""
    doc = r.mapping(tls, "secretRef", SECRET_REF, {"name"})
    if not doc:
        return None
    if tls.get("issuerRef") is not None:
        r.fail(SECRET_REF, f"give one source of certificates: secretRef or {ISSUER_REF}, not both")
    name = r.string(doc, "name", f"{SECRET_REF}.name", None)
    if not name or not SECRET_NAME_PATTERN.match(name):
        r.fail(f"{SECRET_REF}.name", f"must name a Secret: a DNS subdomain (got {name!r})")
        return None
    if tls.get("enabled") is False:
        r.fail(SECRET_REF, "needs TLS: spec.security.tls.enabled is false")
    return name


ISSUER_REF = "spec.security.tls.issuerRef"
ISSUER_KINDS = ("Issuer", "ClusterIssuer")


def _tls_issuer(tls: Mapping[str, Any], r: Reader) -> IssuerRef | None:
    """issuerRef: the cert-manager issuer of the cluster's certificates."""
    doc = r.mapping(tls, "issuerRef", ISSUER_REF, {"name", "kind", "group"})
    if not doc:
        return None
    name = r.string(doc, "name", f"{ISSUER_REF}.name", None)
    if not name or not SECRET_NAME_PATTERN.match(name):
        r.fail(f"{ISSUER_REF}.name", f"must name an issuer: a DNS subdomain (got {name!r})")
        return None
    kind = r.string(doc, "kind", f"{ISSUER_REF}.kind", "Issuer") or "Issuer"
    if kind not in ISSUER_KINDS:
        r.fail(f"{ISSUER_REF}.kind", f"must be Issuer or ClusterIssuer (got {kind!r})")
    group = r.string(doc, "group", f"{ISSUER_REF}.group", "cert-manager.io") or "cert-manager.io"
    if tls.get("enabled") is False:
        r.fail(ISSUER_REF, "needs TLS: spec.security.tls.enabled is false")
    return IssuerRef(name, kind, group)


def _certificates(tls: Mapping[str, Any], r: Reader) -> CertificatesSpec:
    doc = r.mapping(tls, "certificates", CERTIFICATES, {"validity", "renewBefore", "caValidity"})
    validity = _positive_duration(r, doc, "validity", DEFAULT_CERT_VALIDITY, MIN_CERT_VALIDITY_SECONDS)
    ca_validity = _positive_duration(r, doc, "caValidity", DEFAULT_CA_VALIDITY, MIN_CERT_VALIDITY_SECONDS)
    renew_before = None
    if doc.get("renewBefore") is not None:
        renew_before = _positive_duration(r, doc, "renewBefore", "1s", 1.0)
    spec = CertificatesSpec(validity=validity, renew_before=renew_before, ca_validity=ca_validity)
    if spec.renew_before_seconds >= spec.validity_seconds:
        r.fail(
            f"{CERTIFICATES}.renewBefore",
            f"must be shorter than validity ({renew_before} is not shorter than {validity})",
        )
    if spec.ca_validity_seconds <= spec.validity_seconds:
        r.fail(
            f"{CERTIFICATES}.caValidity",
            f"must be longer than validity, leaves never outlive their CA"
            f" ({ca_validity} is not longer than {validity})",
        )
    return spec


def _positive_duration(r: Reader, doc: Mapping[str, Any], key: str, default: str, least: float) -> str:
    path = f"{CERTIFICATES}.{key}"
    value = r.string(doc, key, path, default) or ""
    if not DURATION_PATTERN.match(value) or duration_seconds(value) < least:
        shortest = f"{least:g}s"
        r.fail(path, f"must be a positive duration of at least {shortest} such as 2160h (got {value!r})")
        return default
    return value


def _disaster_recovery(spec: Mapping[str, Any], r: Reader) -> DisasterRecoverySpec:
    doc = r.mapping(spec, "disasterRecovery", "spec.disasterRecovery", {"mode"})
    mode = r.string(doc, "mode", "spec.disasterRecovery.mode", RecoveryMode.MANUAL.value)
    if mode not in {m.value for m in RecoveryMode}:
        r.fail("spec.disasterRecovery.mode", f"must be Automatic or Manual (got {mode!r})")
        mode = RecoveryMode.MANUAL.value
    return DisasterRecoverySpec(mode=RecoveryMode(mode))


BACKUP_FIELDS = {
    "schedule", "deltaPeriod", "retention", "verify", "store", "encryption", "compression",
    "copyTo", "immutable",
}  # fmt: skip


def parse_backup(spec: Mapping[str, Any], r: Reader) -> BackupSpec | None:
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
        r.fail("spec.backup.store", "required: where the backups go (one of local, s3, gcs, azure)")
    else:
        store = parse_store(doc.get("store"), "spec.backup.store", r)
    copy_to = parse_copy_to(doc, store, r)
    written_to = {"spec.backup.store": store, "spec.backup.copyTo.store": copy_to.store if copy_to else None}
    return BackupSpec(
        schedule=schedule,
        retention=RetentionSpec(keep=keep, max_age=max_age),
        verify=r.boolean(doc, "verify", "spec.backup.verify", True),
        store=store,
        delta_period=delta_period,
        encryption=_encryption(doc, r),
        compression=_compression(doc, r),
        copy_to=copy_to,
        immutable=parse_immutable(doc, written_to, r),
    )


def _encryption(doc: Mapping[str, Any], r: Reader) -> EncryptionSpec | None:
    if doc.get("encryption") is None:
        return None
    encryption = r.mapping(doc, "encryption", "spec.backup.encryption", {"keySecret"})
    secret = r.string(encryption, "keySecret", "spec.backup.encryption.keySecret", None)
    if secret is None:
        r.fail("spec.backup.encryption.keySecret", "required: the Secret holding the key (`key`)")
        return None
    if not SECRET_NAME_PATTERN.match(secret):  # locally a file name: no "/"
        r.fail(
            "spec.backup.encryption.keySecret",
            f"must name a Secret: a DNS subdomain such as backup-key (got {secret!r})",
        )
        return None
    return EncryptionSpec(key_secret=secret)


def _compression(doc: Mapping[str, Any], r: Reader) -> Compression:
    value = r.string(doc, "compression", "spec.backup.compression", None)
    try:
        return Compression(value or Compression.ZSTD.value)
    except ValueError:
        choices = " or ".join(c.value for c in Compression)
        r.fail("spec.backup.compression", f"must be {choices} (got {value!r})")
        return Compression.ZSTD


def parse_restore(spec: Mapping[str, Any], r: Reader) -> RestoreSpec | None:
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


ADOPT = "spec.adopt"
ADOPT_FIELDS = {"endpoints", "clientSecret", "peerCASecret", "removeOld"}


def parse_adopt(spec: Mapping[str, Any], r: Reader) -> AdoptSpec | None:
    """spec.adopt: the running cluster this one takes over, and what reaching it takes."""
    raw = spec.get("adopt")
    if raw is None:
        return None
    doc = r.mapping(spec, "adopt", ADOPT, ADOPT_FIELDS)
    if not isinstance(raw, Mapping):
        return None  # r.mapping named the error
    endpoints = _adopt_endpoints(doc, r)
    client_secret = secret_name(doc, "clientSecret", f"{ADOPT}.clientSecret", r)
    schemes = {url.split("://", 1)[0] for url in endpoints}
    if schemes == {"https"} and client_secret is None:
        r.fail(
            f"{ADOPT}.clientSecret",
            "required with https endpoints: the old cluster's CA (ca.crt) and a client certificate"
            " (tls.crt, tls.key); without that CA the supervisor cannot verify the old servers",
        )
    elif schemes == {"http"} and client_secret is not None:
        r.fail(
            f"{ADOPT}.clientSecret",
            "must be absent with http endpoints: a client certificate is only presented over https",
        )
    peer_ca_secret = secret_name(doc, "peerCASecret", f"{ADOPT}.peerCASecret", r)
    _adopt_tls_matches(spec, schemes, peer_ca_secret, r)
    if spec.get("restore") is not None:
        r.fail(
            ADOPT,
            "cannot be set together with spec.restore: both say where a new cluster's data comes from"
            " (adopt: the running cluster's members; restore: a backup)",
        )
    return AdoptSpec(
        endpoints=endpoints,
        client_secret=client_secret,
        peer_ca_secret=peer_ca_secret,
        remove_old=r.boolean(doc, "removeOld", f"{ADOPT}.removeOld", False),
    )


def _adopt_tls_matches(
    spec: Mapping[str, Any], schemes: set[str], peer_ca_secret: str | None, r: Reader
) -> None:
    """The new members speak to the old ones as the old ones speak: TLS everywhere or nowhere.
    (The supervisor runs clients and peers of one cluster with one posture.)"""
    security = spec.get("security")
    tls = security.get("tls") if isinstance(security, Mapping) else None
    enabled = tls.get("enabled", True) if isinstance(tls, Mapping) else True
    if schemes == {"http"} and enabled is True:
        r.fail(
            f"{ADOPT}.endpoints",
            "http endpoints (a cluster without TLS) need spec.security.tls.enabled: false: the old members"
            " speak plain HTTP to their peers, so the new members must too",
        )
    elif schemes == {"https"} and enabled is False:
        r.fail(f"{ADOPT}.endpoints", "https endpoints need spec.security.tls.enabled: true (its default)")
    elif schemes == {"https"} and peer_ca_secret is None:
        r.fail(
            f"{ADOPT}.peerCASecret",
            "required with https endpoints: the old cluster's peer CA (ca.crt, ca.key), which signs the"
            " new members' peer certificates so that the old members accept them",
        )


def _adopt_endpoints(doc: Mapping[str, Any], r: Reader) -> tuple[str, ...]:
    """The old cluster's client URLs: 1 to MAX_SIZE of them, each once, all of one scheme."""
    path = f"{ADOPT}.endpoints"
    value = doc.get("endpoints")
    if value is None:
        r.fail(
            path, "required: the client URLs of the running cluster's members, such as https://old-0.old:2379"
        )
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        r.fail(path, f"must be a non-empty list of client URLs (got {value!r})")
        return ()
    if len(value) > MAX_SIZE:
        r.fail(path, f"may list at most {MAX_SIZE} URLs, the most members a cluster has (got {len(value)})")
    urls: list[str] = []
    for i, url in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(url, str) or not CLIENT_URL_PATTERN.match(url):
            r.fail(
                where,
                "must be an http:// or https:// URL of a host and a port (1-65535), nothing after it,"
                f" such as https://old-0.old:2379 (got {url!r})",
            )
        elif url in urls:
            r.fail(where, f"lists {url} a second time")
        else:
            urls.append(url)
    if len({url.split("://", 1)[0] for url in urls}) > 1:
        r.fail(path, "must be all http or all https: one clientSecret (or none) serves every endpoint")
    return tuple(urls)


def parse_maintenance(spec: Mapping[str, Any], r: Reader) -> MaintenanceSpec:
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


def _defrag(doc: Mapping[str, Any], r: Reader) -> DefragSpec:
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


def _auto_compaction(doc: Mapping[str, Any], r: Reader) -> AutoCompactionSpec:
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


def _unresponsive_after(r: Reader, health: Mapping[str, Any]) -> str:
    path = "spec.health.unresponsiveAfter"
    value = r.string(health, "unresponsiveAfter", path, DEFAULT_UNRESPONSIVE_AFTER) or ""
    if not DURATION_PATTERN.match(value) or duration_seconds(value) < 1:
        r.fail(path, f"must be a duration of at least 1s such as 30s or 2m (got {value!r})")
        return DEFAULT_UNRESPONSIVE_AFTER
    return value

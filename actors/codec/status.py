"""Status records <-> the status objects the CRDs declare (camelCase, RFC 3339 times): the
EtcdCluster's written by the cluster actor, the EtcdBackup's written and read back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from actors.model import (
    BackupPhase,
    BackupStatus,
    ClusterStatus,
    Condition,
    EtcdBackupStatus,
    LastRecovery,
    MemberStatus,
    TlsStatus,
)


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
    if status.tls is not None:
        out["tls"] = _tls_to_dict(status.tls)
    return out


def _tls_to_dict(tls: TlsStatus) -> dict[str, Any]:
    out: dict[str, Any] = {
        "caNotAfter": _rfc3339(tls.ca_not_after),
        "leafNotAfter": _rfc3339(tls.leaf_not_after),
    }
    if tls.last_rotation is not None:
        out["lastRotation"] = {
            "kind": tls.last_rotation.kind.value,
            "completionTime": _rfc3339(tls.last_rotation.completion_time),
        }
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

"""etcd settings every supervised member runs with, whatever runtime starts it.

etcd's strict reconfiguration check (on by default) refuses a MemberAdd, even of a learner,
until the member taking the request has been connected to every voting member for five
seconds. A supervised cluster changes membership only through actors/plan.py, which already
demands more: every voting member answering Status before a learner is added, a healthy
quorum after every removal, a caught-up learner before promotion (etcd checks that one itself
regardless). With etcd's check on, each member of a staged bootstrap waited out those five
seconds after the previous promotion, so a 3-member cluster took about 9 s to form instead of
about 1 s; the guard it adds is the one the plan already holds.
"""

from __future__ import annotations

import hashlib
import re

from actors.model import ClusterSpec, MaintenanceSpec

SUPERVISED_MEMBER_SETTINGS: tuple[tuple[str, str], ...] = (("strict-reconfig-check", "false"),)


def maintenance_settings(maintenance: MaintenanceSpec) -> tuple[tuple[str, str], ...]:
    """spec.maintenance as etcd flags: only what is set (unset keeps the runtime's default)."""
    out: list[tuple[str, str]] = []
    compaction = maintenance.auto_compaction
    if compaction is not None:
        out += [
            ("auto-compaction-mode", compaction.mode.value),
            ("auto-compaction-retention", compaction.retention),
        ]
    if maintenance.quota_backend_bytes is not None:
        out.append(("quota-backend-bytes", str(maintenance.quota_bytes)))
    return tuple(out)


def defrag_settings(version: str) -> tuple[tuple[str, str], ...]:
    """A member that defragments says NOT_SERVING on gRPC health meanwhile (it holds every request
    until the end), so clients that follow health go to another member: etcd's
    --experimental-stop-grpc-service-on-defrag from 3.5.13, a feature gate from 3.6 (3.7 knows
    only the gate)."""
    found = re.match(r"^(\d+)\.(\d+)\.(\d+)", version)
    release = tuple(int(part) for part in found.groups()) if found else (0, 0, 0)
    if release >= (3, 6, 0):
        return (("feature-gates", "StopGRPCServiceOnDefrag=true"),)
    if release >= (3, 5, 13):
        return (("experimental-stop-grpc-service-on-defrag", "true"),)
    return ()


def member_settings(spec: ClusterSpec) -> tuple[tuple[str, str], ...]:
    """The etcd settings of a member of `spec` that both runtimes pass the same way."""
    supervised = (
        SUPERVISED_MEMBER_SETTINGS
        + _with_users_gates(defrag_settings(spec.version), spec.etcd_options.get("feature-gates", ""))
        + maintenance_settings(spec.maintenance)
    )
    # The user's spec.etcdOptions last, sorted: none of them is one of ours (the codec refuses those).
    users = sorted((flag, value) for flag, value in spec.etcd_options.items() if flag != "feature-gates")
    return supervised + tuple(users)


def _with_users_gates(settings: tuple[tuple[str, str], ...], gates: str) -> tuple[tuple[str, str], ...]:
    """etcd reads one --feature-gates: the user's gates (etcdOptions, none of them ours: the codec
    refuses those) go after the supervisor's in the same flag. Without them nothing changes, so
    a spec without gates keeps the fingerprint its members were started with."""
    users = ",".join(item.replace(" ", "") for item in gates.split(",") if item.strip())
    if not users:
        return settings
    ours = [value for flag, value in settings if flag == "feature-gates"]
    rest = tuple((flag, value) for flag, value in settings if flag != "feature-gates")
    return (*rest, ("feature-gates", ",".join([*ours, users])))


def config_fingerprint(spec: ClusterSpec, *runtime_parts: str) -> str:
    """A short digest of what a member of `spec` needs a restart to change: the etcd version,
    member_settings(spec), and what the runtime adds (the image on Kubernetes). Members whose
    recorded fingerprint differs are restarted one at a time (actors/plan/rollout.py)."""
    parts = [spec.version, *(f"{flag}={value}" for flag, value in member_settings(spec)), *runtime_parts]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]

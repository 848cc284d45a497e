"""Rules about changing a running cluster's spec, which only the daemon can judge.

A document can be valid on its own and still ask for a change the supervisor cannot make
safely; such an edit is refused (the cluster keeps its previous spec and reports why), never
half-applied.
"""

from __future__ import annotations

from actors.codec import SpecError
from actors.model import ClusterSpec


def _minor(version: str) -> tuple[int, int]:
    major, minor, _ = version.split("-", 1)[0].split(".", 2)
    return int(major), int(minor)


def refused_changes(current: ClusterSpec, wanted: ClusterSpec) -> tuple[SpecError, ...]:
    """Every rule `wanted` breaks as a change of `current`; empty when the change is allowed."""
    errors = []
    if wanted.tls_enabled != current.tls_enabled:
        # Members' peer and client URLs carry the scheme; switching needs every member
        # re-addressed, which is not one safe membership change.
        errors.append(
            SpecError(
                "spec.security.tls.enabled",
                f"cannot change on an existing cluster (is {current.tls_enabled})",
            )
        )
    if wanted.storage.storage_class_name != current.storage.storage_class_name:
        errors.append(SpecError("spec.storage.storageClassName", "is immutable after creation"))
    if _minor(wanted.version) < _minor(current.version):
        # etcd refuses to start on data written by a newer minor version.
        errors.append(SpecError("spec.version", f"cannot go back from {current.version} to {wanted.version}"))
    return tuple(errors)

"""Rules about changing a running cluster's spec, which only the daemon can judge.

A document can be valid on its own and still ask for a change the supervisor cannot make
safely; such an edit is refused (the cluster keeps its previous spec and reports why), never
half-applied.
"""

from __future__ import annotations

import attrs

from actors.codec import SpecError
from actors.model import AdoptSpec, ClusterSpec


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
    if wanted.tls_secret != current.tls_secret:
        # The members trust one CA at a time: another source is another CA, all at once.
        errors.append(
            SpecError(
                "spec.security.tls.secretRef",
                f"cannot change on an existing cluster (is {current.tls_secret or 'generated certificates'});"
                " rotate the certificates inside the Secret instead",
            )
        )
    if wanted.tls_issuer != current.tls_issuer:
        errors.append(
            SpecError(
                "spec.security.tls.issuerRef",
                f"cannot change on an existing cluster (is {current.tls_issuer or 'not set'}): another"
                " issuer is another CA, trusted by no member",
            )
        )
    if _adoption(wanted.adopt) != _adoption(current.adopt):
        errors.append(SpecError("spec.adopt", refused_adoption(current, wanted)))
    version_error = refused_version_change(current.version, wanted.version)
    if version_error:
        errors.append(SpecError("spec.version", version_error))
    return tuple(errors)


def _adoption(adopt: AdoptSpec | None) -> AdoptSpec | None:
    """What of spec.adopt may not change: all of it but removeOld."""
    return None if adopt is None else attrs.evolve(adopt, remove_old=False)


def refused_adoption(current: ClusterSpec, wanted: ClusterSpec) -> str:
    """Why spec.adopt cannot be added, removed or changed on an existing cluster.

    It is read only while the cluster is created: the new members join the old cluster then.
    Added later, it would ask a cluster with data and members of its own to join another;
    changed, it would name a cluster its members never joined; removed, the old members it
    names would look like members whose data is lost. removeOld alone may change: adopt first,
    then retire the old members once satisfied.
    """
    verb = (
        "be added to" if current.adopt is None else "be removed from" if wanted.adopt is None else "change on"
    )
    return (
        f"cannot {verb} an existing cluster: it is read only while the cluster is created, when its"
        " first members join the running cluster it names, whose members stay members until removeOld"
        " retires them (only removeOld may change)"
    )


def refused_version_change(current: str, wanted: str) -> str:
    """Why etcd cannot go from `current` to `wanted` member by member ("" when it can).

    A patch release either way, or the next minor, rolls the members one at a time; etcd
    supports a cluster of two adjacent minors only while it upgrades, so a minor may not be
    skipped. Going back one minor needs etcd's downgrade API, which etcd has from 3.6 on
    (3.6 -> 3.5, 3.7 -> 3.6); before it, etcd refuses to start on data written by a newer minor.
    """
    (major, minor), (to_major, to_minor) = _minor(current), _minor(wanted)
    if to_major != major:
        return f"cannot change the major version ({current} to {wanted}): etcd supports no such upgrade"
    if to_minor > minor + 1:
        return (
            f"cannot skip a minor version ({current} to {wanted}): etcd upgrades one minor at a time,"
            f" so upgrade to {major}.{minor + 1} first"
        )
    if to_minor < minor - 1 or (to_minor == minor - 1 and (major, minor) < (3, 6)):
        why = "etcd refuses to start on data written by a newer minor"
        why += "; etcd's downgrade API goes back one minor at a time, from 3.6 on (3.7 -> 3.6, 3.6 -> 3.5)"
        return f"cannot go back from {current} to {wanted}: {why}"
    return ""

"""A cluster's own objects (its Services, disruption budget, TLS Secret), one component each,
kept as the operator builds them: made when absent, corrected when they drifted.

Drift is what an operator upgrade that changes a manifest leaves behind (the object made by
the old version), or a hand edit. Each component names the fields this operator owns and only
those are compared and set back; what others own stays as the API server has it: a Service's
clusterIP (immutable, assigned by the API server), status, labels and owners someone added.

A correction is a whole-object update carrying the resourceVersion read (a compare-and-swap,
and the one write verb the operator's RBAC grants on every kind here, Secrets included): a
write in between answers 409 Conflict, and the object is read again.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from attrs import frozen

from actors.model import KIND, CertificatesSpec, ClusterSpec, IssuerRef
from supervisor.kube import issued_tls
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError, is_conflict
from supervisor.kube.network_policy import OperatorAccess, network_policy, networkpolicy_path
from supervisor.kube.tls import generate_cluster_tls

log = logging.getLogger(__name__)

Obj = dict[str, Any]

# Compare-and-swap corrections of one object: tries before giving up.
CONFLICT_ATTEMPTS = 5


@frozen
class ClusterObject:
    """One object the operator keeps per cluster.

    `build` makes it as this version of the operator wants it; the fields named in `owned` (top
    level keys of its spec) are kept as built: set to the built value, or removed where the
    built object has none (a budget's minAvailable when it counts maxUnavailable). Labels and
    the owner reference are always the operator's. `first_data`, when given, fills the
    object's data only when it is made (a Secret's keys, generated once: members trust its CA),
    and is never compared after."""

    what: str  # for the log: "peer Service"
    collection: Callable[[str], str]  # namespace -> the collection's path
    build: Callable[[m.Owner], Obj]
    owned: tuple[str, ...] = ()
    first_data: Callable[[m.Owner], Mapping[str, str]] | None = None


def peer_service(*, warm_records: bool = True) -> ClusterObject:
    """`warm_records`: warm pods are published too (manifests.peer_service; peer_records.py
    says when an existing cluster's Service may be switched to that)."""
    # clusterIP is immutable ("None": headless) and not corrected; its type follows from it.
    return ClusterObject(
        "peer Service",
        lambda ns: m.core_path(ns, "services"),
        lambda owner: m.peer_service(owner, warm_records=warm_records),
        owned=("selector", "ports", "publishNotReadyAddresses"),
    )


def client_service() -> ClusterObject:
    return ClusterObject(
        "client Service",
        lambda ns: m.core_path(ns, "services"),
        m.client_service,
        owned=("type", "selector", "ports", "publishNotReadyAddresses"),
    )


def disruption_budget(min_available: int | None = None) -> ClusterObject:
    """The budget over the voters' pods, minAvailable their quorum (voter_budget.py); None
    while the membership is unknown (nothing admitted). maxUnavailable, which earlier versions
    set, is removed."""
    return ClusterObject(
        "disruption budget",
        m.pdb_path,
        lambda owner: m.disruption_budget(owner, min_available),
        owned=("selector", "maxUnavailable", "minAvailable"),
    )


def tls_secret(
    *, cluster_domain: str, now: Callable[[], dt.datetime], certificates: CertificatesSpec | None = None
) -> ClusterObject:
    def material(owner: m.Owner) -> Mapping[str, str]:
        made = generate_cluster_tls(
            owner.ref, now=now(), cluster_domain=cluster_domain, certificates=certificates
        )
        return made.secret_data()

    return ClusterObject(
        "TLS Secret",
        lambda ns: m.core_path(ns, "secrets"),
        lambda owner: m.tls_secret(owner, {}),
        first_data=material,
    )


CERTIFICATE_FIELDS = (
    "secretName",
    "issuerRef",
    "duration",
    "renewBefore",
    "usages",
    "privateKey",
    "commonName",
    "dnsNames",
    "ipAddresses",
    "secretTemplate",
)


def issued_certificates(
    issuer: IssuerRef, lives: CertificatesSpec, *, cluster_domain: str
) -> list[ClusterObject]:
    """cert-manager's Certificates of a cluster with issuerRef (issued_tls.py); their spec is
    the operator's: an edit is set back."""
    return [
        ClusterObject(
            f"{leaf} Certificate",
            issued_tls.certificates_path,
            partial(
                issued_tls.certificate,
                leaf=leaf,
                issuer=issuer,
                lives=lives,
                cluster_domain=cluster_domain,
            ),
            owned=CERTIFICATE_FIELDS,
        )
        for leaf in issued_tls.LEAVES
    ]


def network_policy_object(spec: ClusterSpec, access: OperatorAccess) -> ClusterObject:
    """Who may reach the cluster's pods (network_policy.py); egress, which it leaves alone, is
    removed if someone added it."""
    return ClusterObject(
        "NetworkPolicy",
        networkpolicy_path,
        lambda owner: network_policy(owner, spec, access),
        owned=("podSelector", "policyTypes", "ingress", "egress"),
    )


def cluster_objects(
    spec: ClusterSpec,
    *,
    cluster_domain: str,
    now: Callable[[], dt.datetime],
    min_available: int | None = None,
    warm_records: bool = True,
    access: OperatorAccess | None = None,
) -> Sequence[ClusterObject]:
    """The objects a cluster of this spec has besides its members; `min_available` is the
    disruption budget's, from the membership last read (None: not read yet); `warm_records`
    the peer Service's (peer_service); `access` what its NetworkPolicy admits as the operator
    (with spec.security.networkPolicy; the runtime deletes the policy without it)."""
    out = [peer_service(warm_records=warm_records), client_service(), disruption_budget(min_available)]
    if spec.tls_enabled and not m.tls_source(spec):  # a brought Secret is copied by byo_tls instead
        out.append(tls_secret(cluster_domain=cluster_domain, now=now, certificates=spec.certificates))
    if spec.tls_enabled and spec.tls_issuer is not None:
        out += issued_certificates(spec.tls_issuer, spec.certificates, cluster_domain=cluster_domain)
    if spec.network_policy:
        out.append(network_policy_object(spec, access or OperatorAccess()))
    return out


def corrected(
    live: Mapping[str, Any], desired: Mapping[str, Any], owned: Sequence[str], owner: m.Owner
) -> Obj | None:
    """`live` with what the operator owns set as in `desired`; None when nothing differs.

    Pure. Labels of its own are set and others' kept; the owner reference becomes this
    EtcdCluster's (an earlier incarnation's, or a reference edited away, is replaced), other
    owners that do not claim to be the controller stay (only one may)."""
    out = copy.deepcopy(dict(live))
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **desired["metadata"].get("labels", {})}
    ours = m.owner_reference(owner)
    owners = meta.get("ownerReferences") or []
    if ours not in owners:
        others = [o for o in owners if o.get("kind") != KIND and not o.get("controller")]
        meta["ownerReferences"] = [*others, ours]
    if owned:
        spec = out.setdefault("spec", {})
        wanted = desired.get("spec") or {}
        for field in owned:
            if field in wanted:
                spec[field] = copy.deepcopy(wanted[field])
            else:
                spec.pop(field, None)
    return None if out == live else out


async def ensure(client: KubeClient, component: ClusterObject, owner: m.Owner) -> None:
    """Make the object if absent, else correct its drift (corrected()).

    Objects built whole are created first: on a new cluster that is the one request, and
    bootstrap waits on it. An object with first_data (the TLS Secret) is read first, so its
    keys are generated only when it is really missing."""
    desired = component.build(owner)
    collection = component.collection(owner.ref.namespace)
    path = f"{collection}/{desired['metadata']['name']}"
    if component.first_data is None and await _create(client, collection, desired):
        return
    for _ in range(CONFLICT_ATTEMPTS):
        live = await client.get_or_none(path)
        if live is None:
            if component.first_data is None:
                return  # deleted since it conflicted: the next ensure makes it
            whole = {**desired, "data": dict(component.first_data(owner))}
            if await _create(client, collection, whole):
                return
            continue  # made in between: correct that one
        fixed = corrected(live, desired, component.owned, owner)
        if fixed is None:
            return
        try:
            await client.replace(path, fixed)
        except KubeError as exc:
            if not is_conflict(exc):
                raise
            continue
        log.info("corrected the %s of %s to what this operator makes", component.what, owner.ref)
        return
    raise KubeError(
        409, "Conflict", f"could not correct the {component.what} of {owner.ref}: too many conflicts"
    )


async def _create(client: KubeClient, collection: str, obj: Obj) -> bool:
    """Create; False when one of that name exists already."""
    try:
        await client.create(collection, obj)
    except KubeError as exc:
        if not is_conflict(exc):
            raise
        return False
    return True

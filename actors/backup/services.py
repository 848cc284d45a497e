"""A cluster's backup children, wired the same way in every mode: the backup actor (scheduled
and on-demand backups) and the delta follower (idle without spec.backup.deltaPeriod).

A mode says where stores are opened, how a snapshot is verified and where on-demand backups
come from (the Platform's `stores`, `verifier` and `requests`); this module builds each
cluster's BackupPorts from them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from attrs import frozen

from actors.backup.actor import RETRY, WAKE_EVERY, backup_child
from actors.backup.delta_actor import delta_child
from actors.backup.delta_verify import VERIFY_EVERY
from actors.backup.deltas import HistorySource
from actors.backup.encoded_store import encoded
from actors.backup.locks import lock_days
from actors.backup.ports import BackupKeySource, BackupPorts, BackupRequests, SnapshotVerifier
from actors.cluster_context import ChildFactory, ClusterContext
from actors.model import ClusterRef, ClusterSpec, StoreSpec
from actors.store_port import ObjectStore
from supervisor.backoff import Backoff
from supervisor.runtime import ChildSpec


class StoreOpener(Protocol):
    """Opens one of a cluster's stores for one use (the actor closes it); the cluster is there for
    what depends on where it lives (the credentials Secret of its namespace, on Kubernetes).
    `lock_days`: every object written is locked that long (spec.backup.immutable; an s3 store)."""

    def __call__(
        self, cluster: ClusterRef, spec: StoreSpec, *, lock_days: int | None = None
    ) -> ObjectStore: ...


# A cluster's snapshot verifier; the spec is read at each verification (its version, its image).
VerifierFactory = Callable[[ClusterRef, Callable[[], ClusterSpec]], SnapshotVerifier]


@frozen
class BackupTiming:
    """How often the backup children look, and how they retry (tests speed them up)."""

    clock: Callable[[], float] = time.time  # wall time, for the schedule
    wake_every: float = WAKE_EVERY
    retry: Backoff = RETRY
    verify_every: float = VERIFY_EVERY  # between verifications of a delta chain


def backup_ports(
    context: ClusterContext,
    stores: StoreOpener,
    verifier: VerifierFactory | None,
    clock: Callable[[], float],
    requests: BackupRequests | None = None,
    keys: BackupKeySource | None = None,
) -> BackupPorts:
    """Every store opened encodes as spec.backup says at its opening (compression, the key
    of its keySecret from `keys`: actors/backup/encoded_store.py) and locks what it writes when
    spec.backup.immutable is set (actors/backup/locks.py)."""
    verify = verifier(context.ref, lambda: context.desired().resource.spec) if verifier else None

    def open_store(spec: StoreSpec) -> ObjectStore:
        backup = context.desired().resource.spec.backup
        return encoded(
            stores(context.ref, spec, lock_days=lock_days(spec, backup)), context.ref, backup, keys
        )

    return BackupPorts(open_store, verify, clock, requests)


def backup_service(
    stores: StoreOpener,
    verifier: VerifierFactory | None,
    requests: BackupRequests | None = None,
    timing: BackupTiming = BackupTiming(),
    keys: BackupKeySource | None = None,
) -> ChildFactory:
    """The backup actor of each cluster (verifier None: backups are stored unverified; keys
    None: encrypted backups fail, naming BackupKeyMissing)."""

    def child(context: ClusterContext) -> ChildSpec:
        ports = backup_ports(context, stores, verifier, timing.clock, requests, keys)
        return backup_child(ports, wake_every=timing.wake_every, retry=timing.retry)(context)

    return child


def delta_service(
    stores: StoreOpener,
    verifier: VerifierFactory | None,
    timing: BackupTiming = BackupTiming(),
    keys: BackupKeySource | None = None,
) -> ChildFactory:
    """The delta follower of each cluster. Its full backups (a compaction overtook its watch)
    are never on-demand ones, so it is given no requests."""

    def child(context: ClusterContext) -> ChildSpec:
        ports = backup_ports(context, stores, verifier, timing.clock, keys=keys)
        return delta_child(ports, history_of, verify_every=timing.verify_every)(context)

    return child


def history_of(context: ClusterContext) -> HistorySource | None:
    """The cluster's etcd admin follows history (the Watch RPC) for the delta follower; an
    admin that cannot leaves the follower idle."""
    admin = context.ports.admin
    return admin if isinstance(admin, HistorySource) else None

"""Running the snapshot pods (snapshot_pods.py): create, feed, watch, and always delete.

KubeVerifier is actors.backup.ports.SnapshotVerifier and KubeRestorer is SeedRestorer, on
Kubernetes. Both push the snapshot from the operator into the pod (snapshot_transfer.py says
why), so they need the operator's own image for the pod's receiving container: `helper_image`
finds it (the --helper-image flag or ETCD_SUPERVISOR_IMAGE, else the image this operator pod runs).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import trio

from actors.backup.deltas import Change
from actors.backup.encoded_store import encoded
from actors.backup.point_in_time import plan_point_in_time
from actors.backup.ports import BackupKeySource, BackupResolver, Restored
from actors.backup.records import KvHash
from actors.backup.restore_checks import (
    check_against_metadata,
    resolve_source,
    restored,
    store_errors_fail_the_restore,
)
from actors.backup.services import StoreOpener
from actors.errors import RestoreFailed
from actors.model import ClusterRef, ClusterSpec, MemberLaunch, RestoreSpec, StoreSpec
from actors.store_port import ObjectStore
from supervisor.etcd.client import EtcdClient, open_etcd_client
from supervisor.etcd.errors import EtcdError
from supervisor.etcd.head_hash import answer_within, hash_at_head, wait_serving
from supervisor.etcd.replay import replaying
from supervisor.etcd.tls import TlsFiles
from supervisor.kube import manifests as m
from supervisor.kube import pod_nudge as nudge
from supervisor.kube import snapshot_pods as pods
from supervisor.kube.client import KubeClient, KubeError
from supervisor.kube.secret_tls import TlsFilesFor
from supervisor.kube.snapshot_transfer import Received, TransferFailed, client_tls, push_snapshot

log = logging.getLogger(__name__)

Obj = dict[str, Any]
HELPER_IMAGE_ENV = "ETCD_SUPERVISOR_IMAGE"
# Pulling an image and restoring a large snapshot take a while; a GiB restores in about a minute.
POD_TIMEOUT = 900.0
POLL = 0.5
# A snapshot pod is reached by its IP, which no certificate names. Every member certificate
# carries "localhost" (tls.member_dns_names) and the CA is the cluster's own, so checking the
# pod's certificate for this name proves it holds this cluster's member key.
POD_SERVER_NAME = "localhost"


class SnapshotPodFailed(Exception):
    """A snapshot pod failed or did not get going; the message carries its container's last words."""


async def helper_image(client: KubeClient, environ: Mapping[str, str] = os.environ) -> str | None:
    """The operator's own image: named explicitly, or read from this pod's spec (in-cluster)."""
    if environ.get(HELPER_IMAGE_ENV):
        return environ[HELPER_IMAGE_ENV]
    name, namespace = environ.get("POD_NAME"), environ.get("POD_NAMESPACE")
    if not (name and namespace):
        return None
    try:
        pod = await client.get(m.core_path(namespace, "pods", name))
    except KubeError as exc:
        log.warning("cannot read this operator's pod %s/%s for its image: %s", namespace, name, exc)
        return None
    containers = (pod.get("spec") or {}).get("containers") or []
    ours = [c for c in containers if c.get("name") == "etcd-supervisor"] or containers
    return str(ours[0]["image"]) if ours else None


async def _owner(client: KubeClient, ref: ClusterRef) -> m.Owner:
    obj = await client.get(m.cluster_path(ref))
    return m.Owner(ref, str((obj.get("metadata") or {}).get("uid", "")))


def _pod_name(ref: ClusterRef, what: str) -> str:
    return f"{ref.name[:40]}-{what}-{secrets.token_hex(3)}"


async def _delete_stale(client: KubeClient, ref: ClusterRef, component: str) -> None:
    """Pods of this kind an earlier operator (or incarnation) left: one at a time per cluster."""
    selector = m.label_selector(pods.snapshot_pod_labels(ref, component))
    found = await client.list_all(m.core_path(ref.namespace, "pods"), query={"labelSelector": selector})
    for pod in found.get("items") or []:
        await client.delete_if_exists(
            m.core_path(ref.namespace, "pods", pod["metadata"]["name"]), grace_period_seconds=0
        )


@contextlib.asynccontextmanager
async def open_snapshot_pod(client: KubeClient, ref: ClusterRef, pod: Obj) -> AsyncIterator[str]:
    """Create `pod`, yield its name once it exists; delete it however the block ends."""
    name = pod["metadata"]["name"]
    path = m.core_path(ref.namespace, "pods", name)
    await _delete_stale(client, ref, pod["metadata"]["labels"][m.LABEL_COMPONENT])
    await client.create(m.core_path(ref.namespace, "pods"), pod)
    try:
        yield name
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(30):
            await client.delete_if_exists(path, grace_period_seconds=0)


# A container waiting for one of these never starts by itself: give up at once.
STUCK = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError")


def _container_statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _trouble(pod: Mapping[str, Any]) -> str | None:
    """Why the pod will not get there: a failed pod's first failed container (its log's tail),
    or a container stuck waiting; None while it may still."""
    for c in _container_statuses(pod):
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK:
            return f"{c.get('name')}: {waiting['reason']}: {waiting.get('message', '')}"
    status = pod.get("status") or {}
    if status.get("phase") != "Failed":
        return None
    for c in _container_statuses(pod):
        terminated = (c.get("state") or {}).get("terminated") or {}
        if terminated.get("exitCode", 0) != 0:
            lines = [ln for ln in str(terminated.get("message") or "").splitlines() if ln.strip()]
            return f"{c.get('name')}: " + (lines[-1][:300] if lines else str(terminated.get("reason")))
    return str(status.get("reason") or status.get("message") or "failed")


async def wait_for_pod(client: KubeClient, path: str, ready: Callable[[Obj], Any]) -> Any:
    """Poll the pod until ready(pod) is truthy (returned); SnapshotPodFailed when it cannot be.
    A new pod the kubelet set aside is nudged meanwhile (pod_nudge.py): a restore's pod mounts
    the seed's new claim, and its first sync can fail on it as a member pod's can."""
    name = path.rsplit("/", 1)[-1]
    schedule = nudge.NudgeSchedule(trio.current_time())
    with trio.move_on_after(POD_TIMEOUT):
        while True:
            pod = await client.get(path)
            trouble = _trouble(pod)
            if trouble:
                raise SnapshotPodFailed(f"pod {name} failed: {trouble}")
            found = ready(pod)
            if found:
                return found
            await nudge.nudge_if_due(client, path, pod, schedule)
            await trio.sleep(POLL)
    raise SnapshotPodFailed(f"pod {name} did not get there in {POD_TIMEOUT:.0f}s")


def _pod_ip(pod: Mapping[str, Any]) -> str | None:
    return (pod.get("status") or {}).get("podIP") or None


async def _push(
    client: KubeClient, path: str, token: str, snapshot: AsyncIterable[bytes], tls: TlsFiles | None
) -> Received:
    ip = await wait_for_pod(client, path, _pod_ip)
    context = client_tls(tls.ca_file) if tls is not None and tls.ca_file is not None else None
    try:
        return await push_snapshot(ip, token, snapshot, tls=context, server_name=POD_SERVER_NAME)
    except (TransferFailed, OSError, trio.BrokenResourceError) as exc:
        pod = await client.get_or_none(path)
        why = f" ({_trouble(pod)})" if pod and _trouble(pod) else ""
        raise SnapshotPodFailed(
            f"the snapshot did not reach pod {path.rsplit('/', 1)[-1]}: {exc}{why}"
        ) from exc


class KubeVerifier:
    """SnapshotVerifier for one cluster: a verify pod on the cluster's own etcd image."""

    def __init__(
        self,
        client: KubeClient,
        ref: ClusterRef,
        spec: Callable[[], ClusterSpec],
        image: str,
        tls_files: TlsFilesFor,
    ) -> None:
        self._client = client
        self._ref = ref
        self._spec = spec  # the spec in force when the backup verifies (its image and version)
        self._image = image
        self._tls_files = tls_files

    async def restored_hash(self, snapshot: AsyncIterable[bytes]) -> KvHash:
        spec = self._spec()
        owner = await _owner(self._client, self._ref)
        tls = await self._tls_files(self._ref) if spec.tls_enabled else None
        token = secrets.token_hex(16)
        pod = pods.verify_pod(
            owner, spec, name=_pod_name(self._ref, "verify"), helper_image=self._image, token=token
        )
        async with open_snapshot_pod(self._client, self._ref, pod) as name:
            path = m.core_path(self._ref.namespace, "pods", name)
            sent = await _push(self._client, path, token, snapshot, tls)
            ip = await wait_for_pod(self._client, path, _running_ip)
            with _answering_within(name, sent):
                if tls is None:
                    return await hash_at_head(f"http://{ip}:{m.CLIENT_PORT}")
                scratch_tls = attrs.evolve(tls, server_name=POD_SERVER_NAME)
                return await hash_at_head(f"https://{ip}:{m.CLIENT_PORT}", tls=scratch_tls)

    async def replayed_hash(
        self, snapshot: AsyncIterable[bytes], changes: Sequence[Change], target: int, *, compact_to: int = 0
    ) -> KvHash:
        spec = self._spec()
        tls = await self._tls_files(self._ref) if spec.tls_enabled else None
        async with replayed_scratch(
            self._client,
            self._ref,
            spec,
            self._image,
            tls,
            snapshot,
            changes,
            target,
            compact_to=compact_to,
            component=pods.COMPONENT_DELTA_VERIFY,
        ) as (_, _, kv_hash, _):
            return kv_hash


@contextlib.contextmanager
def _answering_within(pod: str, received: Received) -> Iterator[None]:
    """Bounds the wait for a scratch pod's etcd to answer by its snapshot's size; then
    SnapshotPodFailed, so the backup is tried again on a new pod instead of waiting out
    POD_TIMEOUT (the warnings head_hash logged meanwhile say what failed)."""
    within = answer_within(received.size)
    with trio.move_on_after(within) as waited:
        yield
    if waited.cancelled_caught:
        raise SnapshotPodFailed(f"the etcd of pod {pod} did not answer within {within:.0f}s of starting")


def _running_ip(pod: Mapping[str, Any]) -> str | None:
    return _pod_ip(pod) if (pod.get("status") or {}).get("phase") == "Running" else None


class KubeRestorer:
    """SeedRestorer on Kubernetes: a restore pod fills the seed member's claim before its pod starts."""

    def __init__(
        self,
        client: KubeClient,
        open_store: StoreOpener,
        image: str | None,
        tls_files: TlsFilesFor,
        resolver: BackupResolver | None = None,
        keys: BackupKeySource | None = None,
    ) -> None:
        self._client = client
        self._raw_store = open_store  # (cluster, store) -> the store, with its namespace's Secret
        self._image = image
        self._tls_files = tls_files
        self._resolver = resolver  # for spec.restore.backupName
        self._keys = keys  # the new cluster's spec.backup.encryption keys decrypt the backup

    def _open_store(self, launch: MemberLaunch, spec: StoreSpec) -> ObjectStore:
        return encoded(self._raw_store(launch.cluster, spec), launch.cluster, launch.spec.backup, self._keys)

    async def restore_seed(self, launch: MemberLaunch, source: RestoreSpec) -> Restored:
        store_spec, key, source = await resolve_source(
            source, launch.cluster, self._resolver, where="operator"
        )
        if self._image is None:
            raise RestoreFailed(
                f"the operator's image is unknown: set {HELPER_IMAGE_ENV} (or --helper-image)"
            )
        if source.revision is not None:
            return await self._restore_to_revision(launch, source, self._image)
        ref = launch.cluster
        # The seed's launch is the first: the runtime has made the cluster's Secret by now.
        tls = await self._tls_files(ref) if launch.spec.tls_enabled else None
        store = self._open_store(launch, store_spec)
        try:
            with store_errors_fail_the_restore(store_spec, key):
                async with self._filling_seed(launch, key, self._image) as (path, token):
                    sent = await _push(self._client, path, token, store.get_stream(key), tls)
                    meta = await check_against_metadata(store, key, sent.sha256)
        except SnapshotPodFailed as exc:
            raise RestoreFailed(f"the backup does not restore: {exc}") from exc
        finally:
            await store.aclose()
        return restored(key, sent.size, sent.sha256, meta)

    async def _restore_to_revision(self, launch: MemberLaunch, source: RestoreSpec, image: str) -> Restored:
        """The newest verified snapshot at or below the revision goes into a scratch pod (a
        verify pod: one etcd serving it alone), the delta changes up to the revision are
        replayed into it over the client port, one transaction per original revision, and its
        snapshot then goes straight into the seed's restore pod. The seed is checked against the
        scratch's HashKV at the revision."""
        assert source.store is not None and source.key is not None and source.revision is not None
        ref, target = launch.cluster, source.revision
        tls = await self._tls_files(ref) if launch.spec.tls_enabled else None
        store = self._open_store(launch, source.store)
        try:
            plan = await plan_point_in_time(store, source.key, target)
            snapshot = store.get_stream(plan.snapshot_key)
            with store_errors_fail_the_restore(source.store, plan.snapshot_key):
                async with replayed_scratch(
                    self._client, ref, launch.spec, image, tls, snapshot, plan.changes, target
                ) as (etcd, url, kv_hash, fetched):
                    await check_against_metadata(store, plan.snapshot_key, fetched.sha256)
                    async with self._filling_seed(launch, plan.snapshot_key, image) as (seed, seed_token):
                        sent = await _push_snapshot_of(etcd, url, self._client, seed, seed_token, tls)
        except SnapshotPodFailed as exc:
            raise RestoreFailed(f"the backup does not restore: {exc}") from exc
        except EtcdError as exc:
            raise RestoreFailed(f"replaying the deltas onto {plan.snapshot_key} failed: {exc}") from exc
        finally:
            await store.aclose()
        return plan.restored(sent.size, sent.sha256, kv_hash.hash)

    @contextlib.asynccontextmanager
    async def _filling_seed(
        self, launch: MemberLaunch, key: str, image: str
    ) -> AsyncIterator[tuple[str, str]]:
        """A restore pod for the seed's claim: yields (its path, its token) for the push, then
        waits for it to lay the data down. The claim is marked as a restore's target meanwhile."""
        ref = launch.cluster
        owner = await _owner(self._client, ref)
        token = secrets.token_hex(16)
        pod = pods.restore_pod(
            owner,
            launch,
            name=_pod_name(ref, "restore"),
            helper_image=image,
            token=token,
            cluster_token=f"{ref.namespace}-{ref.name}-restored-{secrets.token_hex(4)}",
        )
        claim = m.core_path(ref.namespace, "persistentvolumeclaims", m.volume_claim_name(launch.name))
        await _mark_restoring(self._client, claim, key)
        async with open_snapshot_pod(self._client, ref, pod) as name:
            path = m.core_path(ref.namespace, "pods", name)
            yield path, token
            await wait_for_pod(self._client, path, _succeeded)
        await _mark_restoring(self._client, claim, None)


@contextlib.asynccontextmanager
async def replayed_scratch(
    client: KubeClient,
    ref: ClusterRef,
    spec: ClusterSpec,
    image: str,
    tls: TlsFiles | None,
    snapshot: AsyncIterable[bytes],
    changes: Sequence[Change],
    target: int,
    *,
    compact_to: int = 0,
    component: str = pods.COMPONENT_VERIFY,
) -> AsyncIterator[tuple[EtcdClient, str, KvHash, Received]]:
    """A scratch pod (a verify pod: one etcd on the cluster's image, serving alone) holding
    `snapshot` with `changes` replayed onto it up to `target` (supervisor/etcd/replay.py).
    Yields a client of it, its URL, its HashKV at `target` and what the pod received; the pod
    is deleted when the block ends (its leases are kept alive until then)."""
    token = secrets.token_hex(16)
    owner = await _owner(client, ref)
    pod = pods.verify_pod(
        owner, spec, name=_pod_name(ref, "verify"), helper_image=image, token=token, component=component
    )
    async with open_snapshot_pod(client, ref, pod) as scratch:
        path = m.core_path(ref.namespace, "pods", scratch)
        fetched = await _push(client, path, token, snapshot, tls)
        ip = await wait_for_pod(client, path, _running_ip)
        async with _scratch_client(ip, tls) as (etcd, url):
            with _answering_within(scratch, fetched):
                await wait_serving(etcd, url)
            async with replaying(etcd, url, changes, target, compact_to=compact_to) as kv_hash:
                yield etcd, url, kv_hash, fetched


@contextlib.asynccontextmanager
async def _scratch_client(ip: str, tls: TlsFiles | None) -> AsyncIterator[tuple[EtcdClient, str]]:
    """A client of a scratch pod's etcd (reached by its IP: see POD_SERVER_NAME)."""
    if tls is None:
        url, scratch_tls = f"http://{ip}:{m.CLIENT_PORT}", None
    else:
        url, scratch_tls = f"https://{ip}:{m.CLIENT_PORT}", attrs.evolve(tls, server_name=POD_SERVER_NAME)
    async with open_etcd_client([url], tls=scratch_tls, call_timeout=30.0) as etcd:
        yield etcd, url


async def _push_snapshot_of(
    etcd: EtcdClient, url: str, client: KubeClient, path: str, token: str, tls: TlsFiles | None
) -> Received:
    """Stream the member's snapshot into a snapshot pod as it is taken (no copy on disk)."""
    send, receive = trio.open_memory_channel[bytes](8)

    async def take() -> None:
        async with send:
            await etcd.snapshot(send.send, endpoint=url)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take)
        async with receive:
            return await _push(client, path, token, receive, tls)


async def _mark_restoring(client: KubeClient, claim: str, key: str | None) -> None:
    """Mark the seed's claim as a restore's target (the runtime then says it holds no data), or
    clear the mark once the data is all there."""
    await client.merge_patch(claim, {"metadata": {"annotations": {m.ANNOTATION_RESTORING: key}}})


def _succeeded(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Succeeded"

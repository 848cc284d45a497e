"""MemberRuntime on Kubernetes: a member is a Pod on a PersistentVolumeClaim.

Everything is read back from the API server on each call (the EtcdCluster for its uid and spec,
pods and claims by label), so a restarted actor, or a new leader replica, sees what exists.
Restarting a member keeps its data: the old pod goes, a new one mounts the same claim.

The cluster-wide objects (Services, budget, TLS Secret) are made sure of at most once per
ENSURE_EVERY seconds per cluster, and concurrently: bootstrap allocates and starts three members
within seconds, and re-checking them before each step cost a dozen sequential API round trips.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import secrets
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import trio

from actors.codec import parse_spec
from actors.errors import NamespaceTerminating, RuntimeRefused
from actors.model import (
    ClusterRef,
    ClusterSpec,
    MemberConfig,
    MemberLaunch,
    MemberUrls,
    ProcessState,
    RuntimeMember,
)
from actors.ports import MemberChanged
from supervisor.kube import manifests as m
from supervisor.kube import pod_nudge as nudge
from supervisor.kube import warm_members as warm
from supervisor.kube.client import (
    KubeClient,
    KubeError,
    KubeUnavailable,
    is_conflict,
    is_namespace_terminating,
    is_not_found,
)
from supervisor.kube.start_gate import open_gate
from supervisor.kube.tls import generate_cluster_tls
from supervisor.kube.watch import (
    PODS,
    VOLUME_CLAIMS,
    EventType,
    Watcher,
    WatchEvent,
    WatchOptions,
    run_watchers,
    watchers_for,
)
from supervisor.member_subscribers import MemberSubscribers
from supervisor.runtime import leaf_exceptions

log = logging.getLogger(__name__)

Obj = dict[str, Any]

# A member that ran at least this long before it exited counts as having run healthily:
# its crash starts a new count instead of extending a crash loop.
HEALTHY_RUN_SECONDS = 300.0
# Container runtimes report a process killed by signal N as exit code 128 + N (OOMKilled is
# 137). Such a kill is not the member failing by itself and leaves its crash count alone.
KILLED_BY_SIGNAL = 128
# How long cluster-wide objects made sure of count as still there. A Service someone deletes is
# back at the next member allocation or start after this.
ENSURE_EVERY = 30.0
# Compare-and-swap writes of the EtcdCluster's finalizers: tries before giving up.
CONFLICT_ATTEMPTS = 10


P = ParamSpec("P")
T = TypeVar("T")


def _refusals_fail_the_step(
    method: Callable[Concatenate[KubeRuntime, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[KubeRuntime, P], Coroutine[Any, Any, T]]:
    """An answer of the API server other than "unreachable" fails the step (RuntimeRefused):
    the cluster actor holds off and looks again, instead of crashing and restarting, which
    would lose what it had observed and fill the log while a namespace is being deleted."""

    @functools.wraps(method)
    async def refusals_as_failures(self: KubeRuntime, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(self, *args, **kwargs)
        except KubeUnavailable:
            raise  # the API server is away: the supervisor's restart with backoff waits for it
        except KubeError as exc:
            raise _refusal(str(exc), exc) from exc
        except BaseExceptionGroup as group:  # calls made side by side
            refusal = _refusal_in(group)
            if refusal is None:
                raise
            raise refusal from group

    return refusals_as_failures


def _refusal(message: str, *errors: BaseException) -> RuntimeRefused:
    terminating = any(is_namespace_terminating(e) for e in errors)
    return (NamespaceTerminating if terminating else RuntimeRefused)(message)


def _refusal_in(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """What a group of API errors from calls made side by side amounts to: the API server
    unreachable if any call found it so, else a refusal; None if anything else failed."""
    found = _api_error_in(group)
    if found is None or isinstance(found, KubeUnavailable):
        return found
    leaves = leaf_exceptions(group)
    return _refusal("; ".join(str(leaf) for leaf in leaves), *leaves)


def _api_error_in(group: BaseExceptionGroup[BaseException]) -> KubeError | None:
    """The one API error that calls made side by side failed with: the API server unreachable
    if any call found it so, else the first answer; None if anything else failed."""
    leaves = leaf_exceptions(group)
    errors = [leaf for leaf in leaves if isinstance(leaf, KubeError)]
    if len(errors) < len(leaves):
        return None
    away = [e for e in errors if isinstance(e, KubeUnavailable)]
    return (away or errors)[0]


class ClusterGone(Exception):
    """The EtcdCluster does not exist (any more), or is being deleted: nothing may be added."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def _is_ready(pod: Mapping[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def pod_state(pod: Mapping[str, Any] | None) -> ProcessState:
    """Pod phase and readiness -> where the member's process stands."""
    if pod is None:
        return ProcessState.ABSENT
    if _meta(pod).get("deletionTimestamp"):
        return ProcessState.EXITED  # stopping; its data stays
    if m.etcd_finished(pod):
        return ProcessState.EXITED
    phase = (pod.get("status") or {}).get("phase", "Pending")
    if phase == "Running" and _is_ready(pod):
        return ProcessState.RUNNING
    return ProcessState.STARTING


def _being_deleted(*objects: Obj | None) -> bool:
    """Every object the member still has is on its way out (its deletion is requested)."""
    present = [o for o in objects if o is not None]
    return bool(present) and all(_meta(o).get("deletionTimestamp") for o in present)


def pod_exit_code(pod: Mapping[str, Any] | None) -> int | None:
    if pod is None:
        return None
    terminated = m.etcd_state(pod, "terminated")
    code = terminated.get("exitCode")
    return int(code) if code is not None else None


# Why a container is waiting when it cannot start at all: no attempt will get further until
# the spec changes (the image's tag, say). Other waiting reasons (ContainerCreating) pass.
START_FAILURES = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)


def start_failure(pod: Mapping[str, Any] | None) -> str:
    """Why the etcd container cannot start ("ImagePullBackOff: ..."); "" when nothing stops it."""
    if pod is None:
        return ""
    waiting = m.etcd_state(pod, "waiting")
    reason = str(waiting.get("reason") or "")
    if reason not in START_FAILURES:
        return ""
    message = str(waiting.get("message") or "").strip()
    return (f"{reason}: {message}" if message else reason)[:300]


def pod_last_error(pod: Mapping[str, Any] | None) -> str:
    """The etcd container's termination message (with FallbackToLogsOnError, the log's tail),
    or why it cannot start at all."""
    if pod is None:
        return ""
    if failure := start_failure(pod):
        return failure
    terminated = m.etcd_state(pod, "terminated")
    lines = [line for line in str(terminated.get("message") or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else str(terminated.get("reason") or "")


def pod_exit_tail(pod: Mapping[str, Any]) -> str:
    """The whole termination message of the etcd container (the log's tail, at most the
    kubelet's 2 KiB), indented for a log line; "" when it left none."""
    message = str(m.etcd_state(pod, "terminated").get("message") or "").strip()
    return "".join(f"\n    {line}" for line in message.splitlines() if line.strip())


def _log_exit(launch: MemberLaunch, pod: Obj) -> None:
    """Status and Events keep one line of why etcd exited; the pod, and the rest of its log's
    tail with it, goes now. The operator's log keeps all of it for whoever asks why later."""
    log.warning(
        "member %s of %s exited with code %s; its log ended:%s",
        launch.name,
        launch.cluster,
        pod_exit_code(pod),
        pod_exit_tail(pod) or " (no termination message)",
    )


def _claim_has_data(claim: Mapping[str, Any] | None) -> bool:
    """A claim exists (bound or still waiting for a volume), is not going away, and is not
    marked as a restore's target: a restore cut short (the operator died) left no usable data."""
    if claim is None or _meta(claim).get("deletionTimestamp"):
        return False
    return m.ANNOTATION_RESTORING not in (_meta(claim).get("annotations") or {})


def pod_failures(pod: Mapping[str, Any] | None) -> int:
    if pod is None:
        return 0
    try:
        return int((_meta(pod).get("annotations") or {}).get(m.ANNOTATION_FAILURES, "0"))
    except ValueError:
        return 0


def failures_after(old_pod: Mapping[str, Any]) -> int:
    """The crash count for the pod that replaces `old_pod` (which has finished)."""
    terminated = m.etcd_state(old_pod, "terminated")
    if (old_pod.get("status") or {}).get("phase") == "Succeeded" or terminated.get("exitCode") == 0:
        return 0  # a clean exit is no failure
    if int(terminated.get("exitCode") or 0) > KILLED_BY_SIGNAL:
        return pod_failures(old_pod)
    started, finished = _parse_time(terminated.get("startedAt")), _parse_time(terminated.get("finishedAt"))
    if started and finished and (finished - started).total_seconds() >= HEALTHY_RUN_SECONDS:
        return 1
    return pod_failures(old_pod) + 1


def consecutive_failures(pod: Mapping[str, Any] | None) -> int:
    """Exits since the member last ran healthily, as its current pod tells."""
    if pod is None:
        return 0
    if m.etcd_finished(pod):
        return failures_after(pod)
    if pod_state(pod) is ProcessState.RUNNING:
        return 0
    if start_failure(pod):
        # A pod that cannot start its container (an image that cannot be pulled) has failed
        # as surely as one that exited: a rollout to that image stops and says why.
        return max(1, pod_failures(pod))
    return pod_failures(pod)


def _urls_from(obj: Mapping[str, Any] | None) -> MemberUrls | None:
    annotations = _meta(obj).get("annotations") or {} if obj else {}
    peer, client = annotations.get(m.ANNOTATION_PEER_URL), annotations.get(m.ANNOTATION_CLIENT_URL)
    return MemberUrls(peer_url=peer, client_url=client) if peer and client else None


def member_ref(obj: Mapping[str, Any]) -> tuple[ClusterRef, str] | None:
    """Which cluster and member a pod or claim of ours belongs to, from its labels."""
    meta = _meta(obj)
    labels = meta.get("labels") or {}
    instance, member = labels.get(m.LABEL_INSTANCE), labels.get(m.LABEL_MEMBER)
    if not instance or not member or labels.get(m.LABEL_MANAGED_BY) != m.MANAGED_BY:
        return None
    return ClusterRef(namespace=str(meta.get("namespace", "")), name=str(instance)), str(member)


class KubeRuntime:
    """actors.ports.MemberRuntime over pods and volume claims.

    watch_members needs `run()` running (the pod and claim watches) to deliver anything.
    cluster_domain is the Kubernetes cluster's DNS domain: new members' URLs, certificate SANs
    and Bitnami's ETCD_CLUSTER_DOMAIN are fully qualified under it.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        cluster_domain: str = m.DEFAULT_CLUSTER_DOMAIN,
        pod_gone_timeout: float = 120.0,
        poll_interval: float = 0.5,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        ensure_every: float = ENSURE_EVERY,
        helper_image: str | None = None,
        nudge_after: float = nudge.NUDGE_AFTER,
    ) -> None:
        self._client = client
        # While run() runs: where new pods are watched for being set aside (pod_nudge.py).
        self._background: trio.Nursery | None = None
        self._nudge_after = nudge_after
        # The operator's own image, for warm pods' start gate (warm_members.py); looked up from
        # this operator's pod when not given, and no warm pods when it cannot be known.
        self._helper_image = helper_image
        self._helper_image_known = helper_image is not None
        self._ensure_every = ensure_every
        # owner uid -> trio.current_time() when its cluster objects were last made sure of
        self._ensured_at: dict[str, float] = {}
        self._cluster_domain = m.normalize_cluster_domain(cluster_domain)
        self._pod_gone_timeout = pod_gone_timeout
        self._poll = poll_interval
        self._now = now
        self._subscribers = MemberSubscribers()
        self.watchers: list[Watcher] = []  # the running watches, for the operator's metrics

    # --- the cluster object ------------------------------------------------------------------

    async def _read_cluster(self, ref: ClusterRef) -> tuple[m.Owner, ClusterSpec, Obj]:
        try:
            obj = await self._client.get(m.cluster_path(ref))
        except KubeError as exc:
            if is_not_found(exc):
                raise ClusterGone(f"EtcdCluster {ref} not found") from exc
            raise
        # parse_spec without a reader never raises: broken fields fall back to defaults, and
        # the cluster actor reports them; the runtime only needs uid, TLS and the image.
        spec = parse_spec(obj.get("spec") or {})
        return m.Owner(ref, str(_meta(obj).get("uid", ""))), spec, obj

    async def _ensure_finalizer(self, ref: ClusterRef, obj: Obj) -> None:
        def adding(current: Obj | None) -> list[str] | None:
            if current is None:
                raise ClusterGone(f"EtcdCluster {ref} not found")
            if _meta(current).get("deletionTimestamp"):
                raise ClusterGone(f"EtcdCluster {ref} is being deleted")
            finalizers = list(_meta(current).get("finalizers") or [])
            return None if m.FINALIZER in finalizers else [*finalizers, m.FINALIZER]

        await self._swap_finalizers(ref, obj, adding, "add")

    async def _swap_finalizers(
        self, ref: ClusterRef, obj: Obj | None, change: Callable[[Obj | None], list[str] | None], doing: str
    ) -> None:
        """Set the EtcdCluster's finalizers to change(obj)'s (None: nothing to do). The
        resourceVersion makes the patch a compare-and-swap: any write in between (the status,
        written beside the very step that adds ours; a user's edit) answers 409 Conflict, and
        the object is read again (None once it is gone)."""
        path = m.cluster_path(ref)
        for _ in range(CONFLICT_ATTEMPTS):
            finalizers = change(obj)
            if finalizers is None:
                return
            assert obj is not None  # change() has nothing to do on a gone object
            version = _meta(obj).get("resourceVersion")
            try:
                await self._client.merge_patch(
                    path, {"metadata": {"finalizers": finalizers or None, "resourceVersion": version}}
                )
                return
            except KubeError as exc:
                if not is_conflict(exc):
                    raise
            obj = await self._client.get_or_none(path)
        raise KubeError(409, "Conflict", f"could not {doing} the finalizer of {ref}: too many conflicts")

    async def _ensure(self, collection: str, obj: Obj, owner: m.Owner) -> None:
        """Create `obj` unless it exists; adopt an existing one left by an earlier incarnation."""
        try:
            await self._client.create(collection, obj)
            return
        except KubeError as exc:
            if not is_conflict(exc):
                raise
        path = f"{collection}/{obj['metadata']['name']}"
        existing = await self._client.get_or_none(path)
        if existing is None:
            return  # deleted in between; the next call creates it
        owners = _meta(existing).get("ownerReferences") or []
        if not any(o.get("uid") == owner.uid for o in owners):
            await self._client.merge_patch(
                path, {"metadata": {"ownerReferences": [m.owner_reference(owner)]}}
            )

    async def _ensure_cluster_objects(self, owner: m.Owner, spec: ClusterSpec) -> None:
        ensured_at = self._ensured_at.get(owner.uid)
        if ensured_at is not None and trio.current_time() - ensured_at < self._ensure_every:
            return
        ns = owner.ref.namespace
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._ensure, m.core_path(ns, "services"), m.peer_service(owner), owner)
            nursery.start_soon(self._ensure, m.core_path(ns, "services"), m.client_service(owner), owner)
            nursery.start_soon(self._ensure, m.pdb_path(ns), m.disruption_budget(owner), owner)
            if spec.tls_enabled:
                nursery.start_soon(self._ensure_tls_secret, owner)
            nursery.start_soon(self._sweep_warm, owner.ref)
        self._ensured_at[owner.uid] = trio.current_time()

    async def _ensure_tls_secret(self, owner: m.Owner) -> None:
        ns = owner.ref.namespace
        secret_path = m.core_path(ns, "secrets", m.tls_secret_name(owner.ref))
        # Never regenerate over an existing Secret: running members trust its CA.
        if await self._client.get_or_none(secret_path) is None:
            material = generate_cluster_tls(owner.ref, now=self._now(), cluster_domain=self._cluster_domain)
            await self._ensure(m.core_path(ns, "secrets"), m.tls_secret(owner, material.secret_data()), owner)

    # --- MemberRuntime -----------------------------------------------------------------------

    @_refusals_fail_the_step
    async def allocate_member(self, cluster: ClusterRef, name: str, spec: ClusterSpec) -> MemberUrls:
        # The spec in force, not the object's: after a refused edit (a TLS switch, say) the
        # object says what the user asked for, which this cluster does not run.
        owner, _, obj = await self._read_cluster(cluster)
        await self._ensure_finalizer(cluster, obj)
        urls = m.member_urls(cluster, name, tls=spec.tls_enabled, cluster_domain=self._cluster_domain)
        # The claim is the member's record from here on: list_members must show a member the
        # moment etcd may hear of it, or the cluster actor would take the new learner for one
        # whose data is gone and remove it again.
        await self._ensure_objects_and_claim(owner, spec, name, urls)
        return urls

    async def _ensure_objects_and_claim(
        self, owner: m.Owner, spec: ClusterSpec, name: str, urls: MemberUrls
    ) -> None:
        # Side by side: neither needs the other, and a bootstrap waits on both before its pod.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._ensure_cluster_objects, owner, spec)
            nursery.start_soon(self._ensure_claim, owner, spec, name, urls)

    async def _ensure_claim(self, owner: m.Owner, spec: ClusterSpec, name: str, urls: MemberUrls) -> None:
        ns = owner.ref.namespace
        claim = await self._client.get_or_none(
            m.core_path(ns, "persistentvolumeclaims", m.volume_claim_name(name))
        )
        if claim is None:
            await self._ensure(
                m.core_path(ns, "persistentvolumeclaims"),
                m.member_volume_claim(owner, spec, name, urls),
                owner,
            )
        elif _meta(claim).get("deletionTimestamp"):
            raise KubeError(409, "VolumeDeleting", f"the data of {name} is being deleted")
        elif warm.is_warm(claim):  # made ahead for this member (warm_members.py): it is its own now
            path = m.core_path(ns, "persistentvolumeclaims", m.volume_claim_name(name))
            await self._client.merge_patch(path, warm.adoption_patch(owner.ref, name))

    @_refusals_fail_the_step
    async def start_member(self, launch: MemberLaunch) -> None:
        ref, ns = launch.cluster, launch.cluster.namespace
        owner, _, obj = await self._read_cluster(ref)
        await self._ensure_finalizer(ref, obj)
        await self._ensure_objects_and_claim(owner, launch.spec, launch.name, launch.urls)

        # Create first: a new member's pod does not exist yet, and that is the path bootstrap and
        # scale-up wait on. Only a conflict needs a look at the pod that is there.
        if await self._create_pod(owner, launch, failures=0):
            await self._warm_next(owner, launch)
            return
        pod_path = m.core_path(ns, "pods", launch.name)
        pod = await self._client.get_or_none(pod_path)
        if pod is not None and warm.is_warm(pod):
            if await self._adopt_warm_pod(owner, launch, pod):
                await self._warm_next(owner, launch)
                return
            await self._client.delete_if_exists(pod_path, grace_period_seconds=0)
            await self._wait_pod_gone(pod_path, str(_meta(pod).get("uid")))
            pod = None
        failures = 0
        if pod is not None:
            if not _meta(pod).get("deletionTimestamp") and not m.etcd_finished(pod):
                return  # already starting or running
            if not _meta(pod).get("deletionTimestamp"):
                failures = failures_after(pod)
                _log_exit(launch, pod)
                # It has exited; nothing to wait for, so no grace period.
                await self._client.delete_if_exists(pod_path, grace_period_seconds=0)
            await self._wait_pod_gone(pod_path, str(_meta(pod).get("uid")))
        # A concurrent start that won the race made a pod as good as ours.
        await self._create_pod(owner, launch, failures=failures)

    async def _create_pod(self, owner: m.Owner, launch: MemberLaunch, *, failures: int) -> bool:
        """Create the member's pod; False when one of that name exists already."""
        pod = m.member_pod(owner, launch, consecutive_failures=failures, cluster_domain=self._cluster_domain)
        try:
            made = await self._client.create(m.core_path(launch.cluster.namespace, "pods"), pod)
        except KubeError as exc:
            if is_conflict(exc):
                return False
            raise
        self._watch_set_aside(made)
        log.info("started member %s of %s (consecutive failures %d)", launch.name, launch.cluster, failures)
        return True

    def _watch_set_aside(self, pod: Obj) -> None:
        if self._background is not None:
            path = m.core_path(str(_meta(pod).get("namespace")), "pods", str(_meta(pod).get("name")))
            uid = str(_meta(pod).get("uid"))
            watch = functools.partial(nudge.nudge_while_set_aside, every=self._nudge_after)
            self._background.start_soon(watch, self._client, path, uid)

    # --- warm pods (warm_members.py) ------------------------------------------------------------

    async def _warm_image(self) -> str | None:
        if not self._helper_image_known:
            from supervisor.kube.snapshots import helper_image  # the same lookup as snapshot pods

            self._helper_image = await helper_image(self._client)
            self._helper_image_known = True
        return self._helper_image

    async def _warm_next(self, owner: m.Owner, launch: MemberLaunch) -> None:
        """Make the claims and pods of the members still to come ahead of time (up to
        warm.AHEAD), if the cluster is still growing: each is set up on its node by the time
        its turn comes. Only a head start: whatever goes wrong here, a member is made as usual
        later."""
        upcoming = warm.upcoming_launches(launch, cluster_domain=self._cluster_domain)
        if not upcoming:
            return
        image = await self._warm_image()
        if image is None:
            return
        # One after another, in the order they will be needed: the kubelet sets pods up in the
        # order it hears of them, and made side by side the last one needed was as often as
        # not set up first, while the next learner's pod waited (a relist, up to a second).
        for ahead in upcoming:
            await self._make_warm(owner, ahead, image)

    async def _make_warm(self, owner: m.Owner, ahead: MemberLaunch, image: str) -> None:
        ns = owner.ref.namespace
        member = m.member_pod(owner, ahead, consecutive_failures=0, cluster_domain=self._cluster_domain)
        pod = warm.warm_pod(owner, member, helper_image=image, token=secrets.token_hex(16))
        try:
            await self._client.create(
                m.core_path(ns, "persistentvolumeclaims"), warm.warm_claim(owner, ahead)
            )
            made = await self._client.create(m.core_path(ns, "pods"), pod)
        except KubeError as exc:
            if not is_conflict(exc):  # a conflict: made ahead by an earlier start already
                log.info("no warm pod for %s of %s: %s", ahead.name, owner.ref, exc)
            return
        self._watch_set_aside(made)
        log.info("made a warm pod for %s of %s", ahead.name, owner.ref)

    async def _adopt_warm_pod(self, owner: m.Owner, launch: MemberLaunch, pod: Obj) -> bool:
        """Take the warm pod as this member's and open its gate, if it was made for exactly this
        launch and its gate listens; False when it cannot be used (the caller replaces it).

        Adopted first, then waited for: the kubelet may have given the pod up for a while (a
        claim it read as not yet bound fails the pod's sync, retried only after about 10 s), and
        any update of the pod makes it sync again at once."""
        wanted = m.member_pod(owner, launch, consecutive_failures=0, cluster_domain=self._cluster_domain)
        if not warm.made_for(pod, wanted):
            return False
        path = m.core_path(launch.cluster.namespace, "pods", launch.name)
        pod = await self._client.merge_patch(path, warm.adoption_patch(launch.cluster, launch.name))
        gate = await self._gate_when_listening(path, pod)
        if gate is None or not await open_gate(*gate):
            return False
        log.info("started member %s of %s in its warm pod", launch.name, launch.cluster)
        return True

    async def _gate_when_listening(self, path: str, pod: Obj) -> tuple[str, str] | None:
        """The warm pod's gate, waiting for it while the pod is still being set up on its node
        (that is the head start it already has); None if it is not there within WARM_SETUP, or
        the pod is gone or replaced meanwhile."""
        uid = _meta(pod).get("uid")
        with trio.move_on_after(warm.WARM_SETUP):
            while True:
                gate = warm.gate_of(pod)
                if gate is not None:
                    return gate
                if m.etcd_finished(pod):
                    return None
                await trio.sleep(min(self._poll, 0.1))
                found = await self._client.get_or_none(path)
                if found is None or _meta(found).get("uid") != uid:
                    return None
                pod = found
        return None

    async def _sweep_warm(self, ref: ClusterRef) -> None:
        """Delete warm pods whose member never came, and warm claims left without a pod."""
        ns, selector = ref.namespace, m.label_selector(warm.warm_selector(ref))
        query = {"labelSelector": selector}
        try:
            pods = (await self._client.list_all(m.core_path(ns, "pods"), query=query)).get("items") or []
            claims = (
                await self._client.list_all(m.core_path(ns, "persistentvolumeclaims"), query=query)
            ).get("items") or []
        except KubeError as exc:  # tidying only: the next look will do
            log.info("warm pods of %s not swept: %s", ref, exc)
            return
        now = self._now()

        def age_of(obj: Mapping[str, Any]) -> float:
            created = _parse_time(_meta(obj).get("creationTimestamp"))
            return (now - created).total_seconds() if created else 0.0

        doomed_pods, doomed_claims = warm.sweep(pods, claims, age_of=age_of)
        try:
            for name in doomed_pods:
                await self._client.delete_if_exists(m.core_path(ns, "pods", name), grace_period_seconds=0)
            for name in doomed_claims:
                await self._client.delete_if_exists(m.core_path(ns, "persistentvolumeclaims", name))
        except KubeError as exc:
            log.info("warm pods of %s not swept: %s", ref, exc)

    async def _wait_pod_gone(self, path: str, uid: str) -> None:
        with trio.move_on_after(self._pod_gone_timeout):
            while True:
                pod = await self._client.get_or_none(path)
                if pod is None or str(_meta(pod).get("uid")) != uid:
                    return
                await trio.sleep(self._poll)
        raise KubeError(
            409, "PodTerminating", f"{path} is still terminating after {self._pod_gone_timeout:.0f}s"
        )

    @_refusals_fail_the_step
    async def stop_member(self, cluster: ClusterRef, name: str) -> None:
        # The default grace period: etcd gets SIGTERM and time to shut down cleanly.
        await self._client.delete_if_exists(m.core_path(cluster.namespace, "pods", name))

    @_refusals_fail_the_step
    async def delete_member(self, cluster: ClusterRef, name: str) -> None:
        ns = cluster.namespace
        await self._client.delete_if_exists(m.core_path(ns, "pods", name))
        await self._client.delete_if_exists(
            m.core_path(ns, "persistentvolumeclaims", m.volume_claim_name(name))
        )

    async def delete_cluster(self, cluster: ClusterRef, *, keep_data: bool) -> None:
        """Tear down per the reclaim policy, then release the EtcdCluster's finalizer.

        keep_data (Retain): the claims lose their owner reference to the cluster, so the
        garbage collector leaves them when the EtcdCluster goes; otherwise they are deleted.
        """
        ns = cluster.namespace
        selector = m.label_selector(m.member_selector(cluster))
        pods = await self._client.list_all(m.core_path(ns, "pods"), query={"labelSelector": selector})
        for pod in pods.get("items") or []:
            await self._client.delete_if_exists(m.core_path(ns, "pods", _meta(pod)["name"]))
        claims = await self._client.list_all(
            m.core_path(ns, "persistentvolumeclaims"), query={"labelSelector": selector}
        )
        for claim in claims.get("items") or []:
            path = m.core_path(ns, "persistentvolumeclaims", _meta(claim)["name"])
            if keep_data:
                await self._orphan(path, claim)
            else:
                await self._client.delete_if_exists(path)
        for path in (
            m.core_path(ns, "services", m.peer_service_name(cluster)),
            m.core_path(ns, "services", m.client_service_name(cluster)),
            m.pdb_path(ns, m.disruption_budget_name(cluster)),
            m.core_path(ns, "secrets", m.tls_secret_name(cluster)),
        ):
            await self._client.delete_if_exists(path)
        await self._release_finalizer(cluster)

    async def _orphan(self, path: str, obj: Mapping[str, Any]) -> None:
        owners = [o for o in _meta(obj).get("ownerReferences") or [] if o.get("kind") != "EtcdCluster"]
        # JSON merge patch replaces lists whole; null removes the field.
        await self._client.merge_patch(path, {"metadata": {"ownerReferences": owners or None}})

    async def _release_finalizer(self, cluster: ClusterRef) -> None:
        def removing(current: Obj | None) -> list[str] | None:
            finalizers = list(_meta(current).get("finalizers") or []) if current else []
            if m.FINALIZER not in finalizers:
                return None
            finalizers.remove(m.FINALIZER)
            return finalizers

        try:
            obj = await self._client.get_or_none(m.cluster_path(cluster))
            await self._swap_finalizers(cluster, obj, removing, "release")
        except KubeError as exc:
            if not is_not_found(exc):  # gone between the read and the patch: released with it
                raise

    async def list_members(self, cluster: ClusterRef) -> Sequence[RuntimeMember]:
        pod_by_member, claim_by_member = await self._members_objects(cluster)
        tls: bool | None = None
        out = []
        for name in sorted(set(pod_by_member) | set(claim_by_member)):
            pod, claim = pod_by_member.get(name), claim_by_member.get(name)
            urls = _urls_from(pod) or _urls_from(claim)
            if urls is None:
                if tls is None:
                    try:
                        tls = (await self._read_cluster(cluster))[1].tls_enabled
                    except ClusterGone:
                        tls = True
                urls = m.member_urls(cluster, name, tls=tls, cluster_domain=self._cluster_domain)
            out.append(
                RuntimeMember(
                    name=name,
                    urls=urls,
                    state=pod_state(pod),
                    has_data=_claim_has_data(claim),
                    pid=None,
                    consecutive_failures=consecutive_failures(pod),
                    exit_code=pod_exit_code(pod),
                    last_error=pod_last_error(pod),
                    config=str((_meta(pod).get("annotations") or {}).get(m.ANNOTATION_CONFIG, ""))
                    if pod
                    else "",
                    deleting=_being_deleted(pod, claim),
                )
            )
        return out

    async def _members_objects(self, cluster: ClusterRef) -> tuple[dict[str, Obj], dict[str, Obj]]:
        """The cluster's member pods and claims, each by member name. Both lists side by side:
        every step of a bootstrap reads them, so one round trip instead of two is a share of
        its time. A claim is made before etcd hears of its member, so a member etcd lists is
        in the claims whichever list answers first."""
        ns = cluster.namespace
        query = {"labelSelector": m.label_selector(m.member_selector(cluster))}
        found: dict[str, dict[str, Obj]] = {}

        async def by_member(collection: str) -> None:
            items = (await self._client.list_all(m.core_path(ns, collection), query=query)).get("items") or []
            found[collection] = {_meta(o)["labels"][m.LABEL_MEMBER]: o for o in items}

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(by_member, "pods")
                nursery.start_soon(by_member, "persistentvolumeclaims")
        except BaseExceptionGroup as group:
            error = _api_error_in(group)
            if error is None:
                raise
            raise error from group  # as one list call would fail: callers catch KubeError
        return found["pods"], found["persistentvolumeclaims"]

    def member_config(self, spec: ClusterSpec) -> MemberConfig:
        return m.member_config(spec)

    def watch_members(self, cluster: ClusterRef, on_change: MemberChanged) -> Callable[[], None]:
        return self._subscribers.subscribe(cluster, on_change)

    # --- the watches behind watch_members ---------------------------------------------------------

    def dispatch(self, event: WatchEvent) -> None:
        """Tell the subscribers of the event's cluster which member changed."""
        if event.type is EventType.SYNCED:
            return
        found = member_ref(event.object)
        if found is None:
            return
        self._subscribers.dispatch(*found)

    async def run(
        self,
        *,
        namespaces: list[str] | None = None,
        options: WatchOptions | None = None,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Watch our pods and claims (all namespaces, or those listed) and dispatch changes.

        started() once both watches have listed, so subscribers miss nothing after it.
        """
        watchers = [
            *watchers_for(self._client, PODS, namespaces, label_selector=m.MEMBER_SELECTOR, options=options),
            *watchers_for(
                self._client, VOLUME_CLAIMS, namespaces, label_selector=m.MEMBER_SELECTOR, options=options
            ),
        ]
        self.watchers = watchers
        send, recv = trio.open_memory_channel[WatchEvent](64)
        async with trio.open_nursery() as nursery:
            self._background = nursery
            try:
                await nursery.start(run_watchers, watchers, send)
                task_status.started()
                async with recv:
                    async for event in recv:
                        self.dispatch(event)
            finally:
                self._background = None

"""MemberRuntime on Kubernetes: a member is a Pod on a PersistentVolumeClaim.

Everything is read back from the API server on each call (the EtcdCluster for its uid and spec,
pods and claims by label), so a restarted actor, or a new leader replica, sees what exists.
Restarting a member keeps its data: the old pod goes, a new one mounts the same claim.

The cluster-wide objects (Services, budget, TLS Secret: cluster_objects.py) are made sure of at
most once per ENSURE_EVERY seconds per cluster, and concurrently: bootstrap allocates and starts
three members within seconds, and re-checking them before each step cost a dozen sequential API
round trips. Made sure of means made if absent and corrected if they drifted from what this
operator makes (an upgrade that changed a Service, a hand edit).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import trio

from actors.codec import parse_spec
from actors.errors import CertificatesRefused, RuntimeRefused
from actors.model import (
    ClusterRef,
    ClusterResource,
    ClusterSpec,
    IssuerRef,
    MemberConfig,
    MemberLaunch,
    MemberUrls,
    RuntimeMember,
)
from actors.ports import MemberChanged
from supervisor.etcd.addresses import KNOWN, UNADDRESSED
from supervisor.kube import adopted_tls, byo_tls
from supervisor.kube import manifests as m
from supervisor.kube import pod_nudge as nudge
from supervisor.kube import warm_members as warm
from supervisor.kube.certificates import trust_of
from supervisor.kube.client import KubeClient, KubeError, is_conflict, is_not_found
from supervisor.kube.cluster_objects import ClusterObject, cluster_objects, ensure, network_policy_object
from supervisor.kube.finalizer import ClusterGone, add_finalizer, release_finalizer
from supervisor.kube.network_policy import (
    OperatorAccess,
    network_policy,
    network_policy_name,
    networkpolicy_path,
)
from supervisor.kube.peer_records import PeerRecords
from supervisor.kube.pods import (
    being_deleted,
    claim_has_data,
    claim_volume,
    consecutive_failures,
    failures_after,
    member_ref,
    meta,
    pod_exit_code,
    pod_exit_tail,
    pod_last_error,
    pod_state,
    stop_overdue,
    stranded,
    unschedulable,
    urls_from,
)
from supervisor.kube.refusals import api_error_in, refusals_fail_the_step
from supervisor.kube.voter_labels import VoterBudgets
from supervisor.kube.warm_pods import WarmPods
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

__all__ = ["ClusterGone", "KubeRuntime"]
from supervisor.member_subscribers import MemberSubscribers

log = logging.getLogger(__name__)

# How long new member pods of a cluster keep off a node that stranded one of its members: long
# enough for Kubernetes to mark the node NotReady (tainted unschedulable), short enough that a
# returned node takes members again.
LOST_NODE_AVOIDANCE = 300.0

Obj = dict[str, Any]

# How long cluster-wide objects made sure of count as still there. A Service someone deletes, or
# edits, is back as the operator makes it at the next member allocation or start after this.
ENSURE_EVERY = 30.0


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


def note_address(pod: Mapping[str, Any], *, gone: bool = False) -> None:
    """Record the member pod's address for its host name, UNADDRESSED while it has none or once
    it is gone or going (supervisor/etcd/addresses.py: connections to members never ask DNS)."""
    urls = urls_from(pod)
    host = urlsplit(urls.client_url).hostname if urls is not None else None
    if not host:
        return
    address = (pod.get("status") or {}).get("podIP")
    if gone or not address or meta(pod).get("deletionTimestamp"):
        KNOWN.remember(host, UNADDRESSED)
    else:
        KNOWN.remember(host, str(address))


def _annotation(pod: Obj | None, key: str) -> str:
    return str((meta(pod).get("annotations") or {}).get(key, "")) if pod else ""


class KubeRuntime:
    """actors.ports.MemberRuntime over pods and volume claims.

    watch_members needs `run()` running (the pod and claim watches) to deliver anything.
    cluster_domain is the Kubernetes cluster's DNS domain: new members' URLs and certificate
    SANs are fully qualified under it.
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
        access: OperatorAccess | None = None,
    ) -> None:
        self._client = client
        # What the clusters' NetworkPolicies admit as the operator (network_policy.py).
        self.access = access or OperatorAccess()
        # owner uid -> the NetworkPolicy last written for the spec (None: deleted), keep_network_policy
        self._policies: dict[str, Obj | None] = {}
        # While run() runs: where new pods are watched for being set aside (pod_nudge.py).
        self._background: trio.Nursery | None = None
        self._nudge_after = nudge_after
        self._ensure_every = ensure_every
        # owner uid -> trio.current_time() when its cluster objects were last made sure of
        self._ensured_at: dict[str, float] = {}
        self.cluster_domain = m.normalize_cluster_domain(cluster_domain)
        self._pod_gone_timeout = pod_gone_timeout
        self._poll = poll_interval
        self._now = now
        self._subscribers = MemberSubscribers()
        # The disruption budget each cluster's admin last wrote (voter_labels.py).
        self.voter_budgets = VoterBudgets()
        # Which clusters' member pods all carry the peer Service's label (peer_records.py).
        self._peer_records = PeerRecords(client)
        # Nodes that stranded a member of the cluster (node name -> trio time): its new pods
        # are kept off them for a while (LOST_NODE_AVOIDANCE).
        self._lost_nodes: dict[ClusterRef, dict[str, float]] = {}
        self.watchers: list[Watcher] = []  # the running watches, for the operator's metrics
        self._warm = WarmPods(
            client,
            cluster_domain=self.cluster_domain,
            helper_image=helper_image,
            poll_interval=poll_interval,
            now=now,
            watch_set_aside=self._watch_set_aside,
        )

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
        return m.Owner(ref, str(meta(obj).get("uid", ""))), spec, obj

    async def _ensure_cluster_objects(self, owner: m.Owner, spec: ClusterSpec) -> None:
        ensured_at = self._ensured_at.get(owner.uid)
        if ensured_at is not None and trio.current_time() - ensured_at < self._ensure_every:
            return
        objects = cluster_objects(
            spec,
            cluster_domain=self.cluster_domain,
            now=self._now,
            min_available=self.voter_budgets.min_available(owner.ref),
            warm_records=await self._peer_records.all_labelled(owner),
            access=self.access,
        )
        async with trio.open_nursery() as nursery:
            for component in objects:
                nursery.start_soon(ensure, self._client, component, owner)
            if not spec.network_policy:
                nursery.start_soon(self._client.delete_if_exists, self._policy_path(owner.ref))
            source = m.tls_source(spec)
            if spec.tls_enabled and source:
                nursery.start_soon(self._copy_brought_tls, owner, source)
            nursery.start_soon(self._warm.sweep, owner.ref)
        self._ensured_at[owner.uid] = trio.current_time()

    def _policy_path(self, ref: ClusterRef) -> str:
        return networkpolicy_path(ref.namespace, network_policy_name(ref))

    async def keep_network_policy(self, owner: m.Owner, spec: ClusterSpec) -> None:
        """The cluster's NetworkPolicy as `spec` says, now (made, corrected, or deleted with
        networkPolicy false), without waiting for a member step to make sure of the cluster's
        objects: called on each event of the EtcdCluster, it writes only when what it would
        write differs from what it wrote last for this cluster."""
        desired = network_policy(owner, spec, self.access) if spec.network_policy else None
        if owner.uid in self._policies and self._policies[owner.uid] == desired:
            return
        self._policies.pop(owner.uid, None)  # a failure below is tried again at the next event
        if desired is None:
            await self._client.delete_if_exists(self._policy_path(owner.ref))
        else:
            await ensure(self._client, network_policy_object(spec, self.access), owner)
        self._policies[owner.uid] = desired

    async def seed_adopted_tls(self, resource: ClusterResource) -> None:
        """An adopting TLS cluster's Secret, signed by the old cluster's CA (adopted_tls.py)."""
        await adopted_tls.seed_adopted_tls(
            self._client, resource, cluster_domain=self.cluster_domain, now=self._now
        )

    # --- MemberRuntime -----------------------------------------------------------------------

    @refusals_fail_the_step
    async def allocate_member(self, cluster: ClusterRef, name: str, spec: ClusterSpec) -> MemberUrls:
        # The spec in force, not the object's: after a refused edit (a TLS switch, say) the
        # object says what the user asked for, which this cluster does not run.
        owner, _, obj = await self._read_cluster(cluster)
        await add_finalizer(self._client, cluster, obj)
        urls = m.member_urls(cluster, name, tls=spec.tls_enabled, cluster_domain=self.cluster_domain)
        # The claim is the member's record from here on: list_members must show a member the
        # moment etcd may hear of it, or the cluster actor would take the new learner for one
        # whose data is gone and remove it again.
        await self._ensure_objects_and_claim(owner, spec, name, urls)
        return urls

    async def _ensure_objects_and_claim(
        self, owner: m.Owner, spec: ClusterSpec, name: str, urls: MemberUrls
    ) -> None:
        if spec.tls_enabled and m.tls_source(spec):
            # Brought (or cert-manager's) certificates copied first (with the cluster's objects,
            # cert-manager's Certificates among them): the claim is the member's record, and a
            # member recorded while they are unusable would be taken, at the next look, for one
            # whose data is gone (and restarted to join a cluster that never formed).
            await self._ensure_cluster_objects(owner, spec)
            await self._ensure_claim(owner, spec, name, urls)
            return
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
            claim_object = ClusterObject(
                f"volume claim of {name}",
                lambda ns: m.core_path(ns, "persistentvolumeclaims"),
                lambda owner: m.member_volume_claim(owner, spec, name, urls),
            )
            await ensure(self._client, claim_object, owner)
        elif meta(claim).get("deletionTimestamp"):
            raise KubeError(409, "VolumeDeleting", f"the data of {name} is being deleted")
        elif warm.is_warm(claim):  # made ahead for this member (warm_members.py): it is its own now
            path = m.core_path(ns, "persistentvolumeclaims", m.volume_claim_name(name))
            await self._client.merge_patch(path, warm.adoption_patch(owner.ref, name))

    @refusals_fail_the_step
    async def start_member(self, launch: MemberLaunch) -> None:
        ref, ns = launch.cluster, launch.cluster.namespace
        owner, _, obj = await self._read_cluster(ref)
        await add_finalizer(self._client, ref, obj)
        await self._ensure_objects_and_claim(owner, launch.spec, launch.name, launch.urls)

        # Create first: a new member's pod does not exist yet, and that is the path bootstrap and
        # scale-up wait on. Only a conflict needs a look at the pod that is there.
        trust = await self._trust(launch)
        avoid = self._nodes_to_avoid(launch.cluster)
        if await self._create_pod(owner, launch, failures=0, trust=trust):
            await self._warm.make_next(owner, launch, trust, avoid_nodes=avoid)
            return
        pod_path = m.core_path(ns, "pods", launch.name)
        pod = await self._client.get_or_none(pod_path)
        if pod is not None and warm.is_warm(pod):
            if await self._warm.adopt(owner, launch, pod, trust, avoid_nodes=avoid):
                await self._warm.make_next(owner, launch, trust, avoid_nodes=avoid)
                return
            await self._client.delete_if_exists(pod_path, grace_period_seconds=0)
            await self._wait_pod_gone(pod_path, str(meta(pod).get("uid")))
            pod = None
        failures = 0
        if pod is not None:
            if not meta(pod).get("deletionTimestamp") and not m.etcd_finished(pod):
                return  # already starting or running
            if not meta(pod).get("deletionTimestamp"):
                failures = failures_after(pod)
                _log_exit(launch, pod)
                # It has exited; nothing to wait for, so no grace period.
                await self._client.delete_if_exists(pod_path, grace_period_seconds=0)
            await self._wait_pod_gone(pod_path, str(meta(pod).get("uid")))
        # A concurrent start that won the race made a pod as good as ours.
        await self._create_pod(owner, launch, failures=failures, trust=trust)

    async def _copy_brought_tls(self, owner: m.Owner, source: str | IssuerRef) -> None:
        """The user's (or cert-manager's) certificates into the cluster's TLS Secret, before a
        member mounts it; unusable, the step fails naming what is wrong (RuntimeRefused: held
        off, an Event)."""
        try:
            await byo_tls.sync_copy(self._client, owner.ref, source, now=self._now(), owner=owner)
        except CertificatesRefused as e:
            raise RuntimeRefused(str(e)) from e

    async def _trust(self, launch: MemberLaunch) -> str:
        """The trust digest of the cluster's CA material now ("" without TLS): the pod made
        now mounts it, and its annotation says so (a CA rotation rolls the pods without it)."""
        if not launch.spec.tls_enabled:
            return ""
        ref = launch.cluster
        secret = await self._client.get_or_none(m.core_path(ref.namespace, "secrets", m.tls_secret_name(ref)))
        try:
            return trust_of((secret or {}).get("data") or {})
        except (KeyError, ValueError):
            return ""  # not there or not ours to read: the certificates child reports it

    async def _create_pod(self, owner: m.Owner, launch: MemberLaunch, *, failures: int, trust: str) -> bool:
        """Create the member's pod; False when one of that name exists already."""
        # Labelled a voter as it is made when it is one (a voter's new pod after a crash): an
        # unlabelled voter would be evicted unguarded until the next membership read.
        budget = self.voter_budgets.get(launch.cluster)
        pod = m.member_pod(
            owner,
            launch,
            consecutive_failures=failures,
            voter=budget is not None and launch.name in budget.voters,
            trust=trust,
            avoid_nodes=self._nodes_to_avoid(launch.cluster),
        )
        try:
            made = await self._client.create(m.core_path(launch.cluster.namespace, "pods"), pod)
        except KubeError as exc:
            if is_conflict(exc):
                return False
            raise
        self._watch_set_aside(made)
        note_address(made)  # no address yet: probes before the watch reports one ask no DNS
        log.info("started member %s of %s (consecutive failures %d)", launch.name, launch.cluster, failures)
        return True

    def _nodes_to_avoid(self, cluster: ClusterRef) -> tuple[str, ...]:
        """Nodes that stranded a member of the cluster lately. Kubernetes marks a lost node
        unschedulable only after its node-monitor grace period (40-50 s); a replacement made
        before that lands on the same node and never starts (tests/nodes saw it)."""
        now = trio.current_time()
        recent = {n: t for n, t in self._lost_nodes.get(cluster, {}).items() if now - t < LOST_NODE_AVOIDANCE}
        self._lost_nodes[cluster] = recent
        return tuple(sorted(recent))

    def _watch_set_aside(self, pod: Obj) -> None:
        if self._background is not None:
            path = m.core_path(str(meta(pod).get("namespace")), "pods", str(meta(pod).get("name")))
            uid = str(meta(pod).get("uid"))
            watch = functools.partial(nudge.nudge_while_set_aside, every=self._nudge_after)
            self._background.start_soon(watch, self._client, path, uid)

    async def _wait_pod_gone(self, path: str, uid: str) -> None:
        with trio.move_on_after(self._pod_gone_timeout):
            while True:
                pod = await self._client.get_or_none(path)
                if pod is None or str(meta(pod).get("uid")) != uid:
                    return
                if stop_overdue(pod, self._now()):
                    # Its node does not confirm the stop: waiting longer only holds the
                    # cluster's next step back (the planners replace such a member).
                    raise KubeError(409, "PodTerminating", f"{path}: its node has not confirmed the stop")
                await trio.sleep(self._poll)
        raise KubeError(
            409, "PodTerminating", f"{path} is still terminating after {self._pod_gone_timeout:.0f}s"
        )

    @refusals_fail_the_step
    async def stop_member(self, cluster: ClusterRef, name: str) -> None:
        # The default grace period: etcd gets SIGTERM and time to shut down cleanly.
        await self._client.delete_if_exists(m.core_path(cluster.namespace, "pods", name))

    @refusals_fail_the_step
    async def delete_member(self, cluster: ClusterRef, name: str) -> None:
        """Only ever asked for a member etcd no longer lists (removed, or never added). A pod
        whose node does not act on it (pods.stranded) is then deleted at once (no grace period): the
        process may still run on a node that is down or cut off, but it is out of the
        membership, so it can neither vote nor commit, and its peers refuse it if it comes
        back. Forcing it before the removal could let a new pod of the same name run beside it."""
        ns = cluster.namespace
        pod_path = m.core_path(ns, "pods", name)
        pod = await self._client.get_or_none(pod_path)
        if pod is not None and stranded(pod, self._now()):
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            log.warning("force-deleting pod %s of %s: its node %s does not act on it", name, cluster, node)
            if node:
                self._lost_nodes.setdefault(cluster, {})[node] = trio.current_time()
            await self._client.delete_if_exists(pod_path, grace_period_seconds=0)
        else:
            await self._client.delete_if_exists(pod_path)
        await self._client.delete_if_exists(
            m.core_path(ns, "persistentvolumeclaims", m.volume_claim_name(name))
        )

    async def delete_cluster(self, cluster: ClusterRef, *, keep_data: bool) -> None:
        """Tear down per the reclaim policy, then release the EtcdCluster's finalizer.

        keep_data (Retain): the claims lose their owner reference to the cluster, so the
        garbage collector leaves them when the EtcdCluster goes; otherwise they are deleted.
        """
        ns = cluster.namespace
        self.voter_budgets.forget(cluster)
        selector = m.label_selector(m.member_selector(cluster))
        pods = await self._client.list_all(m.core_path(ns, "pods"), query={"labelSelector": selector})
        for pod in pods.get("items") or []:
            await self._client.delete_if_exists(m.core_path(ns, "pods", meta(pod)["name"]))
        claims = await self._client.list_all(
            m.core_path(ns, "persistentvolumeclaims"), query={"labelSelector": selector}
        )
        for claim in claims.get("items") or []:
            path = m.core_path(ns, "persistentvolumeclaims", meta(claim)["name"])
            if keep_data:
                await self._orphan(path, claim)
            else:
                await self._client.delete_if_exists(path)
        for path in (
            m.core_path(ns, "services", m.peer_service_name(cluster)),
            m.core_path(ns, "services", m.client_service_name(cluster)),
            m.pdb_path(ns, m.disruption_budget_name(cluster)),
            m.core_path(ns, "secrets", m.tls_secret_name(cluster)),
            self._policy_path(cluster),
        ):
            await self._client.delete_if_exists(path)
        await release_finalizer(self._client, cluster)

    async def _orphan(self, path: str, obj: Mapping[str, Any]) -> None:
        owners = [o for o in meta(obj).get("ownerReferences") or [] if o.get("kind") != "EtcdCluster"]
        # JSON merge patch replaces lists whole; null removes the field.
        await self._client.merge_patch(path, {"metadata": {"ownerReferences": owners or None}})

    async def list_members(self, cluster: ClusterRef) -> Sequence[RuntimeMember]:
        pod_by_member, claim_by_member = await self._members_objects(cluster)
        tls: bool | None = None
        now = self._now()
        out = []
        for name in sorted(set(pod_by_member) | set(claim_by_member)):
            pod, claim = pod_by_member.get(name), claim_by_member.get(name)
            if pod is not None:
                note_address(pod)
            urls = urls_from(pod) or urls_from(claim)
            if urls is None:
                if tls is None:
                    try:
                        tls = (await self._read_cluster(cluster))[1].tls_enabled
                    except ClusterGone:
                        tls = True
                urls = m.member_urls(cluster, name, tls=tls, cluster_domain=self.cluster_domain)
            out.append(
                RuntimeMember(
                    name=name,
                    urls=urls,
                    state=pod_state(pod),
                    has_data=claim_has_data(claim),
                    volume=claim_volume(claim),
                    pid=None,
                    consecutive_failures=consecutive_failures(pod),
                    exit_code=pod_exit_code(pod),
                    last_error=pod_last_error(pod),
                    config=_annotation(pod, m.ANNOTATION_CONFIG),
                    trust=_annotation(pod, m.ANNOTATION_TRUST),
                    deleting=being_deleted(pod, claim),
                    stranded=stranded(pod, now),
                    unschedulable=unschedulable(pod),
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
            found[collection] = {meta(o)["labels"][m.LABEL_MEMBER]: o for o in items}

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(by_member, "pods")
                nursery.start_soon(by_member, "persistentvolumeclaims")
        except BaseExceptionGroup as group:
            error = api_error_in(group)
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
        if "containers" in (event.object.get("spec") or {}):  # a pod (the other watch: claims)
            note_address(event.object, gone=event.type is EventType.DELETED)
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

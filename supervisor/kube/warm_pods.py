"""Warm pods on Kubernetes: the I/O around warm_members.py's pure decisions.

Members still to come get their claim and a pod ahead of time, with etcd held behind a start
gate; when a member's turn comes its warm pod is adopted and the gate opened, or, if it does
not fit, replaced. Warm pods whose member never came are swept with the cluster's objects.
Only ever a head start: whatever goes wrong here, a member is made as usual later."""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio

from actors.model import ClusterRef, MemberLaunch
from supervisor.kube import manifests as m
from supervisor.kube import warm_members as warm
from supervisor.kube.client import KubeClient, KubeError, is_conflict
from supervisor.kube.pods import meta, parse_time
from supervisor.kube.start_gate import open_gate

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class WarmPods:
    """Makes, adopts and sweeps one runtime's warm pods.

    helper_image is the operator's own image, for the start gate; looked up from this
    operator's pod when not given, and no warm pods when it cannot be known. watch_set_aside
    is told of every pod made (the runtime watches whether the kubelet set it aside)."""

    def __init__(
        self,
        client: KubeClient,
        *,
        cluster_domain: str,
        helper_image: str | None,
        poll_interval: float,
        now: Callable[[], dt.datetime],
        watch_set_aside: Callable[[Obj], None],
    ) -> None:
        self._client = client
        self._cluster_domain = cluster_domain
        self._image = helper_image
        self._image_known = helper_image is not None
        self._poll = poll_interval
        self._now = now
        self._watch_set_aside = watch_set_aside

    async def _helper_image(self) -> str | None:
        if not self._image_known:
            from supervisor.kube.snapshots import helper_image  # the same lookup as snapshot pods

            self._image = await helper_image(self._client)
            self._image_known = True
        return self._image

    async def make_next(
        self, owner: m.Owner, launch: MemberLaunch, trust: str, *, avoid_nodes: Sequence[str] = ()
    ) -> None:
        """Make the claims and pods of the members still to come ahead of time (up to
        warm.AHEAD), if the cluster is still growing: each is set up on its node by the time
        its turn comes. Only a head start: whatever goes wrong here, a member is made as usual
        later."""
        upcoming = warm.upcoming_launches(launch, cluster_domain=self._cluster_domain)
        if not upcoming:
            return
        image = await self._helper_image()
        if image is None:
            return
        # One after another, in the order they will be needed: the kubelet sets pods up in the
        # order it hears of them, and made side by side the last one needed was as often as
        # not set up first, while the next learner's pod waited (a relist, up to a second).
        for ahead in upcoming:
            await self._make_warm(owner, ahead, image, trust, avoid_nodes)

    async def _make_warm(
        self, owner: m.Owner, ahead: MemberLaunch, image: str, trust: str, avoid_nodes: Sequence[str]
    ) -> None:
        ns = owner.ref.namespace
        # Kept off the nodes the member's own pod would be kept off (lately lost ones).
        member = m.member_pod(owner, ahead, consecutive_failures=0, trust=trust, avoid_nodes=avoid_nodes)
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

    async def adopt(
        self, owner: m.Owner, launch: MemberLaunch, pod: Obj, trust: str, *, avoid_nodes: Sequence[str] = ()
    ) -> bool:
        """Take the warm pod as this member's and open its gate, if it was made for exactly this
        launch and its gate listens; False when it cannot be used (the caller replaces it).

        Adopted first, then waited for: the kubelet may have given the pod up for a while (a
        claim it read as not yet bound fails the pod's sync, retried only after about 10 s), and
        any update of the pod makes it sync again at once."""
        # Kept off the nodes the member's own pod would be kept off: a warm pod made before a
        # node was lost may sit on it.
        wanted = m.member_pod(owner, launch, consecutive_failures=0, trust=trust, avoid_nodes=avoid_nodes)
        if not warm.made_for(pod, wanted):
            return False
        path = m.core_path(launch.cluster.namespace, "pods", launch.name)
        pod = await self._client.merge_patch(path, warm.pod_adoption_patch(launch.cluster, launch.name))
        gate = await self._gate_when_listening(path, pod)
        if gate is None or not await open_gate(*gate):
            return False
        log.info("started member %s of %s in its warm pod", launch.name, launch.cluster)
        return True

    async def _gate_when_listening(self, path: str, pod: Obj) -> tuple[str, str] | None:
        """The warm pod's gate, waiting for it while the pod is still being set up on its node
        (that is the head start it already has); None if it is not there within WARM_SETUP, or
        the pod is gone or replaced meanwhile."""
        uid = meta(pod).get("uid")
        with trio.move_on_after(warm.WARM_SETUP):
            while True:
                gate = warm.gate_of(pod)
                if gate is not None:
                    return gate
                if m.etcd_finished(pod):
                    return None
                await trio.sleep(min(self._poll, 0.1))
                found = await self._client.get_or_none(path)
                if found is None or meta(found).get("uid") != uid:
                    return None
                pod = found
        return None

    async def sweep(self, ref: ClusterRef) -> None:
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
            created = parse_time(meta(obj).get("creationTimestamp"))
            return (now - created).total_seconds() if created else 0.0

        doomed_pods, doomed_claims = warm.sweep(pods, claims, age_of=age_of)
        try:
            for name in doomed_pods:
                await self._client.delete_if_exists(m.core_path(ns, "pods", name), grace_period_seconds=0)
            for name in doomed_claims:
                await self._client.delete_if_exists(m.core_path(ns, "persistentvolumeclaims", name))
        except KubeError as exc:
            log.info("warm pods of %s not swept: %s", ref, exc)

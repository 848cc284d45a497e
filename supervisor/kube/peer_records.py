"""The peer-record label on member pods made before it existed: the step before the peer Service
may select by it.

The peer Service publishes the pods that carry the label (manifests.peer_service: members and
warm pods). Member pods an earlier operator made lack it, and a Service switched to the label
while one of them did would drop that member's DNS record: its peers could no longer reach it.
So the Service keeps selecting member pods only until every member pod of the cluster carries
the label; this labels the ones that lack it (a label patch restarts nothing) and says when all
do. Once they do, every pod this operator makes carries it, so a cluster is looked at once per
operator process.
"""

from __future__ import annotations

import logging

from actors.model import ClusterRef
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError, is_not_found
from supervisor.kube.pods import meta

log = logging.getLogger(__name__)

PATCH = {"metadata": {"labels": {m.LABEL_PEER_RECORD: "true"}}}


class PeerRecords:
    """Which clusters' member pods all carry the peer-record label (by owner uid)."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._labelled: set[str] = set()

    async def all_labelled(self, owner: m.Owner) -> bool:
        """True once every member pod of the cluster carries the label (labelling those that
        do not); False when that could not be made sure of this time (tried again next time)."""
        if owner.uid in self._labelled:
            return True
        try:
            await self._label_member_pods(owner.ref)
        except KubeError as exc:
            log.warning("member pods of %s not labelled for the peer Service yet: %s", owner.ref, exc)
            return False
        self._labelled.add(owner.uid)
        return True

    async def _label_member_pods(self, ref: ClusterRef) -> None:
        query = {"labelSelector": m.label_selector(m.member_selector(ref))}
        listed = await self._client.list_all(m.core_path(ref.namespace, "pods"), query=query)
        for pod in listed.get("items") or []:
            if (meta(pod).get("labels") or {}).get(m.LABEL_PEER_RECORD) == "true":
                continue
            name = meta(pod)["name"]
            try:
                await self._client.merge_patch(m.core_path(ref.namespace, "pods", name), PATCH)
            except KubeError as exc:
                if not is_not_found(exc):  # gone: it needs no record
                    raise
            log.info("labelled member pod %s of %s for the peer Service", name, ref)

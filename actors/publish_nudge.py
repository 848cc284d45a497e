"""The publish nudge: a per-cluster child that frees a new learner stuck on etcd 3.6's publish.

A member serves clients only once its own attributes (its name and client URLs) are committed
and applied: it proposes them as soon as it knows the leader. A learner added to a cluster with
a history is sent a snapshot; when the leader cuts that snapshot after the learner's proposal
was applied, the learner receives its entry inside the snapshot and never applies it itself, so
the proposal times out (7 s), and every retry is refused as "too many requests": etcd compares
its committed index with an applied-index counter that applying a snapshot does not advance
(v3_server.go's gap check; the same in 3.7.0). It clears as soon as the learner applies any
new entry; nothing else in a quiet cluster commits one, so the learner waits until
`unresponsiveAfter` restarts it (30 s by default). A caching DNS makes the ordering likely: it
delays the leader's first dial of the learner. Measured on loopback with TLS: 2 of 4 additions
stalled 60 s without a restart; committed entries every few seconds freed each within the first
proposal's 7 s timeout.

So while a learner runs and has answered no probe for NUDGE_AFTER, this child commits an entry
that changes nothing through the voters (an alarm list: etcd takes it through raft), at most
every NUDGE_EVERY, until the learner answers or `unresponsiveAfter` is reached (the cluster
actor's restart takes over then). A learner that is merely catching up costs one empty entry
per NUDGE_EVERY. No Event per nudge (it is routine and frequent): an info log line; etcd's own
`grpc_server_handled_total{grpc_method="Alarm"}` counts them on the voters. Voters restarted on
their data are not nudged: they are sent a snapshot only when far behind, and have not been seen
stuck.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from actors.cluster_context import ChildFactory, ClusterContext
from actors.errors import EtcdError
from actors.model import ProcessState
from actors.observed import Observed
from supervisor.runtime import ChildSpec

log = logging.getLogger(__name__)

# A learner that starts and catches up answers within about 2 s (a TLS cluster, a caching DNS,
# no history to send); a stuck one stays silent until its first proposal times out (7 s).
NUDGE_AFTER = 3.0
NUDGE_EVERY = 2.0


def stuck_learners(observed: Observed, unresponsive_after: float) -> list[str]:
    """Learners of ours whose process runs and has answered nothing for NUDGE_AFTER, and not
    yet for `unresponsive_after` (a restart's turn then)."""
    runtime = [observed.runtime_for(m) for m in observed.learners()]
    return sorted(
        r.name
        for r in runtime
        if r is not None
        and r.state is ProcessState.RUNNING
        and not observed.is_healthy(r.name)
        and NUDGE_AFTER <= observed.silent_for.get(r.name, 0.0) < unresponsive_after
    )


def voter_endpoints(observed: Observed) -> list[str]:
    """Client URLs of the healthy voters (a learner refuses what goes through raft)."""
    urls = []
    for member in observed.healthy_voters():
        runtime = observed.runtime_for(member)
        if runtime is not None:
            urls.append(runtime.urls.client_url)
        elif member.client_urls:  # an adopted cluster's old member
            urls.append(member.client_urls[0])
    return urls


class PublishNudge:
    def __init__(self, context: ClusterContext, clock: Callable[[], float] = trio.current_time) -> None:
        self._context = context
        self._clock = clock
        self._last = float("-inf")

    async def run(self) -> None:
        while True:
            observed = await self._context.feed.wait_next()
            await self.look(observed)

    async def look(self, observed: Observed) -> None:
        resource = self._context.desired().resource
        if resource.suspended or resource.spec.hibernate or not observed.has_quorum():
            return
        stuck = stuck_learners(observed, resource.spec.health.unresponsive_after_seconds)
        endpoints = voter_endpoints(observed)
        if not stuck or not endpoints or self._clock() - self._last < NUDGE_EVERY:
            return
        self._last = self._clock()
        with trio.move_on_after(self._context.timing.call_timeout):
            try:
                await self._context.ports.admin.append_empty_entry(endpoints)
            except EtcdError as e:
                log.info("cluster %s: no empty entry committed for %s: %s", self._context.ref, stuck, e)
                return
            log.info(
                "cluster %s: committed an empty entry for %s, silent since starting (etcd's publish)",
                self._context.ref,
                ", ".join(stuck),
            )


def publish_nudge_child() -> ChildFactory:
    """The per-cluster child that frees learners stuck on their publish (above)."""

    def child(context: ClusterContext) -> ChildSpec:
        async def start(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            task_status.started()
            await PublishNudge(context).run()

        return ChildSpec("publish-nudge", start, shutdown=1.0)

    return child

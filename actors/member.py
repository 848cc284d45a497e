"""The member actor: one per etcd member, probing it on every health tick.

It only observes: each probe's answer goes to the cluster actor, which decides. So a member
actor can crash or be restarted at any point and nothing is lost but one probe.

A member that has just started (or restarted) answers within moments, and the cluster's next
step usually waits on that answer. An eager probe therefore asks again every short interval
until the member serves with a leader (for at most Timing.eager_window), instead of leaving
the step to wait for the next tick or for the runtime to report it running.
"""

from __future__ import annotations

from collections.abc import Callable

import trio
from attrs import frozen

from actors.errors import EtcdError
from actors.model import MemberHealth
from actors.ports import EtcdAdmin
from supervisor.runtime import Actor


@frozen
class Probe:
    """A health tick: ask the member for its Status now; eagerly, when it just started."""

    eager: bool = False


@frozen
class MemberProbed:
    """What one probe found: the member's Status, or None when it did not answer."""

    name: str
    health: MemberHealth | None
    # When the answer was asked for (trio's clock): an answer asked before a member restarted,
    # or before a step changed the cluster, describes the world before it, however late it lands.
    asked_at: float


class MemberActor(Actor[Probe]):
    __slots__ = (
        "_admin",
        "_client_url",
        "_eager_interval",
        "_eager_window",
        "_name",
        "_probe_timeout",
        "_report",
    )

    def __init__(
        self,
        name: str,
        client_url: str,
        admin: EtcdAdmin,
        report: Callable[[MemberProbed], None],
        *,
        probe_timeout: float,
        eager_interval: float,
        eager_window: float,
    ) -> None:
        self._name = name
        self._client_url = client_url
        self._admin = admin
        self._report = report
        self._probe_timeout = probe_timeout
        self._eager_interval = eager_interval
        self._eager_window = eager_window

    async def handle(self, msg: Probe) -> None:
        asked_at = trio.current_time()
        health = await self._probe()
        if msg.eager:
            give_up = asked_at + self._eager_window
            while not serving(health) and trio.current_time() + self._eager_interval < give_up:
                await trio.sleep(self._eager_interval)
                asked_at = trio.current_time()
                health = await self._probe()
        self._report(MemberProbed(self._name, health, asked_at))

    async def _probe(self) -> MemberHealth | None:
        with trio.move_on_after(self._probe_timeout):
            try:
                return await self._admin.member_health(self._client_url)
            except EtcdError:
                pass  # down or unreachable: that is the observation
        return None


def serving(health: MemberHealth | None) -> bool:
    """Answering, error-free, and following a leader: what the cluster's next step waits for."""
    return health is not None and not health.errors and health.leader_id != 0

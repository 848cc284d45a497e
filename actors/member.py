"""The member actor: one per etcd member, probing it on every health tick.

It only observes: each probe's answer goes to the cluster actor, which decides. So a member
actor can crash or be restarted at any point and nothing is lost but one probe.
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
    """A health tick: ask the member for its Status now."""


@frozen
class MemberProbed:
    """What one probe found: the member's Status, or None when it did not answer."""

    name: str
    health: MemberHealth | None


class MemberActor(Actor[Probe]):
    __slots__ = ("_admin", "_client_url", "_name", "_probe_timeout", "_report")

    def __init__(
        self,
        name: str,
        client_url: str,
        admin: EtcdAdmin,
        report: Callable[[MemberProbed], None],
        *,
        probe_timeout: float,
    ) -> None:
        self._name = name
        self._client_url = client_url
        self._admin = admin
        self._report = report
        self._probe_timeout = probe_timeout

    async def handle(self, msg: Probe) -> None:
        health: MemberHealth | None = None
        with trio.move_on_after(self._probe_timeout):
            try:
                health = await self._admin.member_health(self._client_url)
            except EtcdError:
                health = None  # down or unreachable: that is the observation
        self._report(MemberProbed(self._name, health))

"""An adopted cluster's old members (spec.adopt): which etcd members the supervisor does not run,
and their health, asked by the cluster actor each time it reads the membership (member actors
probe only the members the runtime runs)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import trio

from actors.errors import EtcdError
from actors.model import AdoptSpec, EtcdMember, MemberHealth, RuntimeMember
from actors.ports import EtcdAdmin


def unowned(runtime: Iterable[RuntimeMember], members: Sequence[EtcdMember] | None) -> list[EtcdMember]:
    """Started members (they have a name) that no runtime member stands for.

    Only an adopting cluster calls them foreign: elsewhere such a member lost its pod and volume
    (plan/data_loss.py). A learner added by the supervisor has no name until it starts, and a
    member of ours whose runtime record is gone during an adoption is taken for an old one (with
    removeOld it leaves the membership either way, and the size planner replaces it)."""
    ours = {r.urls.peer_url for r in runtime}
    return [m for m in members or () if m.name and not ours.intersection(m.peer_urls)]


def lookup_endpoints(adopt: AdoptSpec | None, known: Iterable[EtcdMember]) -> list[str]:
    """Where else to ask for the membership: the old members last seen, then the spec's list."""
    if adopt is None:
        return []
    seen = [m.client_urls[0] for m in known if m.client_urls]
    return list(dict.fromkeys([*seen, *adopt.endpoints]))


async def probe(
    admin: EtcdAdmin, members: Sequence[EtcdMember], call_timeout: float
) -> dict[int, MemberHealth | None]:
    """Each member's Status answer, asked concurrently; None for one that does not answer."""
    answers: dict[int, MemberHealth | None] = {m.id: None for m in members}

    async def ask(member: EtcdMember) -> None:
        with trio.move_on_after(call_timeout):
            try:
                answers[member.id] = await admin.member_health(member.client_urls[0])
            except EtcdError:
                pass

    async with trio.open_nursery() as nursery:
        for m in members:
            if m.client_urls:
                nursery.start_soon(ask, m)
    return answers

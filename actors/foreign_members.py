"""An adopted cluster's old members (spec.adopt): which etcd members the supervisor does not run,
and their health, asked by the cluster actor each time it reads the membership (member actors
probe only the members the runtime runs); and, until a member of ours exists, whether the
cluster to adopt has etcd auth on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import trio

from actors.errors import AuthRefused, EtcdError
from actors.model import AdoptSpec, AuthAnswer, EtcdMember, MemberHealth, OldAuth, RuntimeMember
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


async def ask_auth(admin: EtcdAdmin, endpoints: Sequence[str], call_timeout: float) -> OldAuth:
    """Whether the cluster to adopt has auth on. A refusal is kept apart from no answer: etcd
    refuses to say only when auth is on (AuthStatus then needs a root user), so it is never
    taken for "off" (plan/adoption.py waits on anything but OFF)."""
    with trio.move_on_after(call_timeout):
        try:
            on = await admin.auth_enabled(endpoints)
            return OldAuth(AuthAnswer.ON if on else AuthAnswer.OFF)
        except AuthRefused as e:
            return OldAuth(AuthAnswer.REFUSED, str(e))
        except EtcdError as e:
            return OldAuth(AuthAnswer.UNANSWERED, str(e))
    return OldAuth(AuthAnswer.UNANSWERED, f"no answer in {call_timeout:g}s")

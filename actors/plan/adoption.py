"""An adopted cluster (spec.adopt): the size planner adds the members we run as learners, which
join the old members' cluster; once they vote, the old members leave one at a time
(spec.adopt.removeOld), leadership moved off each first. A cluster with etcd auth on is not
joined at all."""

from __future__ import annotations

from collections.abc import Sequence

from actors.actions import MoveLeader, RemoveMember, Step, Wait
from actors.model import AuthAnswer, ClusterSpec, EtcdMember, RuntimeMember
from actors.observed import Observed

MAX_MEMBERS = 9  # etcd's own bound on a cluster's size


def not_begun(spec: ClusterSpec, runtime: Sequence[RuntimeMember]) -> bool:
    """An adoption before its first member: nothing of ours runs, so nothing in the old cluster
    may change yet (the cluster actor asks whether its auth is on only then, the auth child
    waits till then)."""
    return spec.adopt is not None and not runtime


def auth_off_first(spec: ClusterSpec, observed: Observed) -> Step | None:
    """No member joins a cluster to adopt whose auth is on, nor one not known to have it off.

    With auth on etcd refuses the new members' MemberAdd (and, over plain HTTP, even the
    membership list) to a client that is not a root user, and the supervisor holds no password
    of the old cluster's. Only "off" lets the adoption go on: a refused AuthStatus means auth is
    on (etcd answers anyone while it is off), no answer means nothing is known. Before the
    membership-unknown planner, which reads a refused member list as a cluster that does not
    answer."""
    if not not_begun(spec, observed.runtime):
        return None  # the first member joined with auth off; the auth child manages it since
    found = observed.adopt_auth
    if found is not None and found.answer is AuthAnswer.OFF:
        return None
    detail = f" ({found.detail})" if found is not None and found.detail else ""
    if found is None or found.answer is AuthAnswer.UNANSWERED:
        if observed.etcd_members is None:
            return None  # nothing answers at all: plan/bootstrap.py says so
        return Wait(f"spec.adopt: not yet known whether the cluster to adopt has etcd auth on{detail}")
    refused = f"refuses AuthStatus{detail}: its auth is on"
    said = "has etcd auth on" if found.answer is AuthAnswer.ON else refused
    return Wait(
        f"spec.adopt: the cluster to adopt {said}; a cluster is adopted only with auth off: turn it"
        " off there (etcdctl auth disable) and the adoption goes on, nothing is changed meanwhile;"
        " once adopted, auth is managed with spec.security.auth"
    )


def adopt(spec: ClusterSpec, observed: Observed) -> Step | None:
    old = observed.foreign_members()
    if spec.adopt is None or not old:
        return None
    refused = _refusal(spec, observed, old)
    if refused is not None:
        return Wait(refused)
    if observed.learners() or len(observed.own_voters()) < spec.size or not spec.adopt.remove_old:
        return None  # the new members come first; without removeOld the old ones stay
    return _retire(observed, old)


def _refusal(spec: ClusterSpec, observed: Observed, old: list[EtcdMember]) -> str | None:
    """Why the old cluster cannot be adopted as it is, or None."""
    if observed.own_voters():
        return None  # adoption began: the checks held when the first member joined
    if len(old) + spec.size > MAX_MEMBERS:
        return (
            f"spec.adopt: the cluster to adopt has {len(old)} members, and {spec.size} new ones would"
            f" make {len(old) + spec.size}: etcd allows at most {MAX_MEMBERS}"
        )
    scheme = "https" if spec.tls_enabled else "http"
    other = sorted(url for m in old for url in m.peer_urls if not url.startswith(f"{scheme}://"))
    if other:
        return (
            f"spec.adopt: the old members' peer URLs ({', '.join(other)}) do not use {scheme}, as members"
            f" with spec.security.tls.enabled: {str(spec.tls_enabled).lower()} do: the new members speak"
            " to their peers as the old ones do, or not at all"
        )
    versions = {h.version for h in observed.foreign.values() if h is not None and h.version}
    wanted = _minor(spec.version)
    unsupported = sorted(v for v in versions if _minor(v) not in (wanted, (wanted[0], wanted[1] - 1)))
    if unsupported:
        return (
            f"spec.adopt: the cluster to adopt runs etcd {', '.join(unsupported)}; members of"
            f" spec.version {spec.version} can join a cluster of the same minor or the one before"
        )
    return None


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _retire(observed: Observed, old: list[EtcdMember]) -> Step:
    # Who leads, as answers asked before the last step tell it, may be who led before a move.
    unconfirmed = sorted(observed.answered_before_step & set(observed.health))
    if unconfirmed:
        return Wait(f"the old members leave once {', '.join(unconfirmed)} answered since the last step")
    # An old member that does not answer goes first: removing it costs nothing.
    victim = min(old, key=lambda m: (observed.healthy(m), m.name))
    if victim.id == observed.leader_id():
        target = next((m for m in observed.own_voters() if observed.healthy(m)), None)
        if target is None:
            return Wait(f"no healthy new member to move leadership to from {victim.name}")
        return MoveLeader(target.name, target.id, reason=f"{victim.name}, an adopted member, is leaving")
    if not observed.can_remove(victim):
        return Wait(f"removing the adopted member {victim.name} now would cost quorum")
    return RemoveMember(victim.id, victim.name, reason="adopted: the new members vote, the old ones leave")

"""What the cluster actor observed of one cluster, and the questions every planner asks of it.

Pure: no trio, no asyncio, no I/O. Planners, assess() and per-cluster children all read the
same `Observed`, so they can never disagree about which member is healthy or who leads.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property

from attrs import field, frozen

from actors.maintenance.board import DefragRound
from actors.model import (
    ClusterRef,
    EtcdMember,
    LastBackup,
    MemberConfig,
    MemberHealth,
    OldAuth,
    ProcessState,
    RuntimeMember,
    Vanished,
)


def quorum(voters: int) -> int:
    return voters // 2 + 1


@frozen(slots=False)  # not slotted: the lookups below are computed once per Observed
class Observed:
    """One cluster's facts at one moment, as the cluster actor gathered them."""

    cluster: ClusterRef
    runtime: tuple[RuntimeMember, ...]
    # etcd's membership list, or None when no member answered (membership unknown).
    etcd_members: tuple[EtcdMember, ...] | None
    # Latest Status answer per runtime member name; absent or None means unreachable.
    health: Mapping[str, MemberHealth | None]
    # Running members: seconds since each last answered a probe (or started, if later).
    silent_for: Mapping[str, float] = field(factory=dict)
    # Stopped members: seconds since each was first seen stopped.
    stopped_for: Mapping[str, float] = field(factory=dict)
    # Members whose pod the scheduler cannot place: seconds since that was first seen.
    unplaced_for: Mapping[str, float] = field(factory=dict)
    # Members already restarted for not answering, silent again since.
    restarted_silent: frozenset[str] = frozenset()
    # Members deleted in a row for vanishing from etcd's membership (None: none since the last
    # member joined): new members are added with a backoff meanwhile.
    vanished: Vanished | None = None
    # The defragmentation round under way (actors/maintenance), if any.
    maintenance: DefragRound | None = None
    # Every member: seconds since it last answered a probe (restarts do not reset it).
    unreachable_for: Mapping[str, float] = field(factory=dict)
    # Members whose latest answer was asked before the cluster's last step ended: it may describe
    # a process since restarted, or a leader since moved (a probe stays fresh for seconds).
    answered_before_step: frozenset[str] = frozenset()
    # The highest store revision any member reported to this cluster actor: what the cluster had
    # reached as far as the supervisor knows (a quorum loss may cost what came after it).
    revision_seen: int = 0
    # (seconds ago, revision) samples of the store revision, oldest first, a tenth of a periodic
    # autoCompaction's retention apart (actors/maintenance/revisions.py); empty without one.
    revision_ages: tuple[tuple[float, int], ...] = ()
    # The newest verified backup the backup actor reported (the last resort when all data is lost).
    newest_verified_backup: LastBackup | None = None
    # The last revision the delta backups reach from a verified snapshot (0: none).
    deltas_reach: int = 0
    # Whether this cluster ever had members: a status listed some, or one answered a probe. With
    # no member left at all (no pod, no volume), such a cluster lost its data; a new one did not.
    had_members: bool = False
    # The configuration members of the spec in force should run with (None: not asked).
    desired: MemberConfig | None = None
    # Runtime members no probe has answered (nor failed to) since the cluster actor started:
    # not known to be down, only not asked yet (a daemon just restarted over a running cluster).
    unprobed: frozenset[str] = frozenset()
    # spec.hibernate: the backup the backup actor took for this hibernation (None: not yet).
    final_backup: LastBackup | None = None
    # The cluster was hibernated (phase Hibernated) and has not served since: waking it, a
    # member whose data is gone comes back from the newest verified backup (plan/hibernate.py).
    hibernated: bool = False
    # spec.adopt: members of the adopted cluster that the supervisor does not run, by etcd member
    # id, with their latest Status answer (None: unreachable). They count for quorum and
    # leadership, and are never restarted, replaced or rolled: only removed once the new members
    # vote (plan/adoption.py, with spec.adopt.removeOld).
    foreign: Mapping[int, MemberHealth | None] = field(factory=dict)
    # Why the membership could not be read last time ("" when it was, or nothing was asked).
    membership_error: str = ""
    # spec.adopt, before a member of ours exists: whether the cluster to adopt has auth on
    # (None: not asked, which plan/adoption.py takes for "not known", never for "off").
    adopt_auth: OldAuth | None = None

    # --- the runtime side --------------------------------------------------------------------

    def runtime_by_name(self) -> dict[str, RuntimeMember]:
        return dict(self._by_name)

    @cached_property
    def _by_name(self) -> dict[str, RuntimeMember]:
        return {m.name: m for m in self.runtime}

    @cached_property
    def _by_peer_url(self) -> dict[str, RuntimeMember]:
        return {r.urls.peer_url: r for r in reversed(self.runtime)}  # the first listed wins

    def runtime_for(self, member: EtcdMember) -> RuntimeMember | None:
        for url in member.peer_urls:
            found = self._by_peer_url.get(url)
            if found is not None:
                return found
        return None

    def is_healthy(self, name: str) -> bool:
        # A member that answers is healthy even while its runtime still calls it starting: a
        # pod's status trails its container by up to a kubelet relist (a second), and waiting
        # for it would cost every step of a bootstrap that second. Answers from before the
        # member's latest start never get here (the cluster actor drops them).
        r = self._by_name.get(name)
        if r is None or r.state not in (ProcessState.STARTING, ProcessState.RUNNING):
            return False
        h = self.health.get(name)
        return h is not None and not h.errors

    def running(self) -> list[RuntimeMember]:
        """Members whose process runs or is starting."""
        return [r for r in self.runtime if r.state in (ProcessState.STARTING, ProcessState.RUNNING)]

    def nospace(self) -> bool:
        """A member reports the NOSPACE alarm (raised for the whole cluster: writes are refused)."""
        return any(h is not None and "NOSPACE" in h.alarms for h in self.health.values())

    def outdated(self) -> list[RuntimeMember]:
        """Members whose process was started with another configuration than the desired one."""
        if self.desired is None:
            return []
        return [r for r in self.runtime if r.config != self.desired.fingerprint]

    def untrusting(self) -> list[RuntimeMember]:
        """Members started with other CA material than the store holds now (a CA rotation)."""
        desired = self.desired
        if desired is None or not desired.trust:
            return []
        return [
            r
            for r in self.runtime
            if r.trust != desired.trust and (r.trust or desired.rotating_ca) and not r.deleting
        ]

    def to_roll(self) -> list[RuntimeMember]:
        """Members a rolling restart must restart: another configuration, or other CA material."""
        outdated = self.outdated()
        seen = {r.name for r in outdated}
        return [*outdated, *(r for r in self.untrusting() if r.name not in seen)]

    def mixed_configs(self) -> bool:
        """Members started with different configurations: a rolling restart is under way."""
        return len({r.config for r in self.runtime if r.config}) > 1

    # --- etcd's side -------------------------------------------------------------------------

    @property
    def members(self) -> tuple[EtcdMember, ...]:
        return self.etcd_members or ()

    def voters(self) -> list[EtcdMember]:
        return [m for m in self.members if not m.is_learner]

    def learners(self) -> list[EtcdMember]:
        return [m for m in self.members if m.is_learner]

    def healthy(self, member: EtcdMember) -> bool:
        r = self.runtime_for(member)
        if r is None:
            h = self.foreign.get(member.id)
            return h is not None and not h.errors
        return self.is_healthy(r.name)

    def is_foreign(self, member: EtcdMember) -> bool:
        """A member of an adopted cluster that the supervisor does not run."""
        return member.id in self.foreign

    def foreign_members(self) -> list[EtcdMember]:
        return [m for m in self.members if self.is_foreign(m)]

    def own_voters(self) -> list[EtcdMember]:
        """Voters the supervisor runs: what spec.size counts (an adopted cluster's old members
        vote too, but are not the cluster's size)."""
        return [m for m in self.voters() if not self.is_foreign(m)]

    def healthy_own_voters(self) -> list[EtcdMember]:
        """What status.readyReplicas (the scale subresource's count against spec.size) counts."""
        return [m for m in self.own_voters() if self.healthy(m)]

    def healthy_voters(self) -> list[EtcdMember]:
        return [m for m in self.voters() if self.healthy(m)]

    def has_quorum(self) -> bool:
        voters = self.voters()
        return bool(voters) and len(self.healthy_voters()) >= quorum(len(voters))

    def name_of(self, member: EtcdMember) -> str:
        """etcd's name, or the runtime's for a learner not yet started (etcd has none for it)."""
        if member.name:
            return member.name
        r = self.runtime_for(member)
        return r.name if r else ""

    def initial_cluster(self, joining: str, peer_url: str | None = None) -> tuple[tuple[str, str], ...]:
        """etcd's name=peerURL list for `joining` starting into the existing cluster.

        Every member is listed, the joining one included; a learner added but not yet started
        has no name in etcd's list, so names come from the runtime records. `peer_url` names
        the joining member's address where neither knows it yet (a learner being added)."""
        pairs = []
        for m in self.members:
            name = self.name_of(m)
            if name and m.peer_urls:
                pairs.append((name, m.peer_urls[0]))
        if joining not in {n for n, _ in pairs}:
            r = self.runtime_by_name().get(joining)
            url = r.urls.peer_url if r is not None else peer_url
            if url is not None:
                pairs.append((joining, url))
        return tuple(sorted(pairs))

    def display_name(self, member: EtcdMember) -> str:
        return self.name_of(member) or f"{member.id:x}"

    def leader_id(self) -> int | None:
        # The leader as most healthy members see it; a lone dissenter is mid-election.
        votes: dict[int, int] = {}
        for name, h in self.health.items():
            if h is not None and h.leader_id and self.is_healthy(name):
                votes[h.leader_id] = votes.get(h.leader_id, 0) + 1
        for h in self.foreign.values():
            if h is not None and h.leader_id and not h.errors:
                votes[h.leader_id] = votes.get(h.leader_id, 0) + 1
        return max(votes, key=lambda k: votes[k]) if votes else None

    def not_heard_from(self) -> list[str]:
        """Running members not probed yet: what they would answer is unknown, not bad."""
        live = (ProcessState.STARTING, ProcessState.RUNNING)
        return sorted(r.name for r in self.runtime if r.name in self.unprobed and r.state in live)

    def quorum_in_doubt(self) -> bool:
        """No healthy quorum as far as the probes tell, but members not probed yet could make
        one: too soon to call it lost (the first look of a cluster actor just started)."""
        waiting = set(self.not_heard_from())
        if not waiting or self.has_quorum():
            return False
        if self.etcd_members is None:
            return True  # no member told the membership yet, and some were not even asked
        voters = self.voters()
        could = [m for m in voters if self.healthy(m) or self._runtime_name(m) in waiting]
        return len(could) >= quorum(len(voters))

    def _runtime_name(self, member: EtcdMember) -> str | None:
        r = self.runtime_for(member)
        return r.name if r is not None else None

    def can_remove(self, member: EtcdMember) -> bool:
        """Removing `member` leaves a healthy quorum of the voters that remain."""
        if member.is_learner:
            return True  # learners do not vote
        remaining_healthy = len([v for v in self.healthy_voters() if v.id != member.id])
        return remaining_healthy >= quorum(len(self.voters()) - 1)

    # --- where to aim etcd calls ---------------------------------------------------------------

    def endpoints(self) -> list[str]:
        """Client URLs to aim etcd calls at: the leader first, then voters, then the rest."""

        def rank(r: RuntimeMember) -> tuple[int, str]:
            h = self.health.get(r.name)
            if h is None:
                return (3, r.name)
            if h.member_id == h.leader_id:
                return (0, r.name)
            return (2 if h.is_learner else 1, r.name)

        live = [r for r in self.runtime if r.state in (ProcessState.RUNNING, ProcessState.STARTING)]
        own = [r.urls.client_url for r in sorted(live, key=rank)]
        # An adopted cluster's old members: its leader first, the rest after the members we run.
        leader = self.leader_id()
        foreign = [m for m in self.foreign_members() if m.client_urls]
        first = [m.client_urls[0] for m in foreign if m.id == leader]
        return first + own + [m.client_urls[0] for m in foreign if m.id != leader]

    def highest_raft_index(self) -> int:
        """The furthest raft index any member reported: about the leader's."""
        answers = [*self.health.values(), *self.foreign.values()]
        return max((h.raft_index for h in answers if h is not None), default=0)

"""Hypothesis strategies for random worlds of cluster "default/demo": a spec and what the cluster
actor might have observed of it, for the planners' property tests.

A world is up to nine member slots. Each slot may be listed by etcd (a voter, or a learner started
or not yet), be known to the runtime (in any process state, with or without data, crash-looping,
silent for long, being deleted), and answer probes or not; one answering member's leader is the
leader most answers name. Slot i uses the names and addresses of tests/unit/facts.py (demo-<i>,
etcd ID 1000+i). Nothing here is required to be consistent beyond what etcd and the runtimes
guarantee (unique IDs and names): the planners must be safe on any of it.
"""

from __future__ import annotations

from hypothesis import strategies as st

from actors.maintenance.board import DefragRound
from actors.model import (
    DEFAULT_VERSION,
    ClusterSpec,
    DisasterRecoverySpec,
    EtcdMember,
    MemberConfig,
    MemberHealth,
    ProcessState,
    RecoveryMode,
    RuntimeMember,
)
from actors.observed import Observed
from tests.unit.facts import C, em, urls

MAX_MEMBERS = 9
# Longer than any bound the planners apply (unresponsiveAfter, the crash backoff, the recovery
# bound): a duration drawn from {0, LONG} is either "just now" or "for good".
LONG = 10_000.0


def specs(max_size: int = MAX_MEMBERS) -> st.SearchStrategy[ClusterSpec]:
    return st.builds(
        ClusterSpec,
        size=st.integers(1, max_size),
        disaster_recovery=st.builds(DisasterRecoverySpec, mode=st.sampled_from(RecoveryMode)),
    )


@st.composite
def _slot(draw: st.DrawFn, i: int, healthy_odds: int) -> tuple[EtcdMember | None, RuntimeMember | None, dict]:
    """One member slot: etcd's record, the runtime's, and the facts about its probes. A slot is
    a plainly healthy member (running, answering without errors) `healthy_odds` times as often
    as anything at all, so that worlds with a healthy quorum, the ones where steps can cost it,
    are common."""
    healthy = draw(st.sampled_from((True,) * healthy_odds + (False,)))
    role = draw(st.sampled_from(("voter", "voter", "voter", "learner", "none")))
    etcd = None
    if role != "none":
        learner = role == "learner"
        etcd = em(i, learner=learner, started=not learner or draw(st.booleans()))
    runtime = None
    if healthy or draw(st.sampled_from((True, True, True, False))):
        running = (ProcessState.RUNNING, ProcessState.STARTING)
        runtime = RuntimeMember(
            f"demo-{i}",
            urls(i),
            draw(st.sampled_from(running if healthy else tuple(ProcessState))),
            has_data=draw(st.sampled_from((True, True, True, False))),
            pid=100 + i,
            consecutive_failures=draw(st.integers(0, 4)),
            config=draw(st.sampled_from(("", "v1", "v1", "v2"))),
            deleting=draw(st.sampled_from((False, False, False, True))),
        )
    facts = {
        "answers": healthy or draw(st.booleans()),
        "errors": () if healthy else draw(st.sampled_from(((), ("etcdserver: no leader",)))),
        "applied": draw(st.sampled_from((100, 100, 50))),
        "silent_for": draw(st.sampled_from((0.0, LONG))),
        "stopped_for": draw(st.sampled_from((0.0, LONG))),
        "restarted_silent": draw(st.booleans()),
        "answered_before_step": draw(st.sampled_from((False, False, True))),
    }
    return etcd, runtime, facts


@st.composite
def observations(draw: st.DrawFn, max_members: int = MAX_MEMBERS) -> Observed:
    n = draw(st.integers(0, max_members))
    healthy_odds = draw(st.integers(0, 6))
    slots = [draw(_slot(i, healthy_odds)) for i in range(n)]
    names = [f"demo-{i}" for i in range(n)]
    answering = [i for i, (_, r, f) in enumerate(slots) if r is not None and f["answers"]]
    leader = 1000 + draw(st.sampled_from(answering)) if answering and draw(st.booleans()) else 0
    health = {}
    for i in answering:
        etcd, _, facts = slots[i]
        health[names[i]] = MemberHealth(
            1000 + i,
            leader,
            raft_index=100,
            raft_applied_index=facts["applied"],
            is_learner=etcd is not None and etcd.is_learner,
            db_size=4096,
            errors=facts["errors"],
            version=DEFAULT_VERSION,
        )
    known = draw(st.sampled_from((True, True, True, True, False)))
    maintenance = None
    if draw(st.sampled_from((False, False, True))):
        pending = draw(st.sets(st.sampled_from(names))) if names else set()
        maintenance = DefragRound("schedule '0 3 * * *'", frozenset(pending))
    return Observed(
        C,
        runtime=tuple(r for _, r, _ in slots if r is not None),
        etcd_members=tuple(e for e, _, _ in slots if e is not None) if known else None,
        health=health,
        silent_for={names[i]: f["silent_for"] for i, (_, _, f) in enumerate(slots)},
        stopped_for={names[i]: f["stopped_for"] for i, (_, _, f) in enumerate(slots)},
        restarted_silent=frozenset(names[i] for i, (_, _, f) in enumerate(slots) if f["restarted_silent"]),
        maintenance=maintenance,
        unreachable_for={names[i]: f["silent_for"] for i, (_, _, f) in enumerate(slots)},
        answered_before_step=frozenset(
            names[i] for i, (_, _, f) in enumerate(slots) if f["answered_before_step"]
        ),
        had_members=draw(st.booleans()),
        desired=draw(
            st.sampled_from((None, MemberConfig("v1"), MemberConfig("v1", unavailable="not installed")))
        ),
    )

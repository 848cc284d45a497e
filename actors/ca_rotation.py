"""When a TLS cluster's CA is rotated, one phase at a time, without an outage. Pure.

etcd reads the CAs it trusts once, at start, so every change of trust needs each member
restarted; a rotation is therefore three changes of the store, each followed by a rolling
restart (actors/plan/rollout.py, one member at a time, healthy-gated, leader last):

1. BEGIN: a new CA is made and added to the trust bundle; the old one still signs. Once every
   member restarted with the bundle, every member trusts leaves of either CA.
2. SWITCH: the new CA signs: every leaf is re-signed by it, its key becomes the signing key.
   Members restart to present the new leaves (on Kubernetes the mounted Secret lags).
3. DROP: the old CA leaves the bundle. Members restart to forget it; then the rotation is done.

Each phase is read back from the store (how many CAs it trusts, whether a new CA waits to
sign) and the members' trust digests from the runtime, never held in memory: a supervisor
killed at any point resumes where the store and the members are.

A rotation starts when `etcd.io/rotate-ca` carries a value the store has not acted on, or
when the CA has lived AUTO_ROTATE_AT of its life.
"""

from __future__ import annotations

import enum

from attrs import frozen

from actors.certificates import CertificateState

AUTO_ROTATE_AT = 0.8


class CaPhase(enum.StrEnum):
    STEADY = "steady"  # one CA, trusted and signing
    BUNDLED = "bundled"  # a new CA trusted beside the old, the old still signing
    SWITCHED = "switched"  # the new CA signs, the old still trusted


class CaStep(enum.StrEnum):
    BEGIN = "begin"
    SWITCH = "switch"
    DROP = "drop"
    FINISH = "finish"  # every member restarted without the old CA: record the completion


@frozen
class CaDecision:
    step: CaStep
    why: str


def phase(state: CertificateState) -> CaPhase:
    if state.pending_ca:
        return CaPhase.BUNDLED
    if state.trusted > 1:
        return CaPhase.SWITCHED
    return CaPhase.STEADY


def rotating(state: CertificateState) -> bool:
    """A rotation is under way: a phase past STEADY, or the last phase's restarts not done."""
    record = state.record
    finishing = record.begun_at is not None and (record.completed_at or 0.0) < record.begun_at
    return phase(state) is not CaPhase.STEADY or finishing


def wanted(state: CertificateState, request: str, now: float) -> str:
    """Why a rotation should start now ("" when it should not)."""
    if request and request != state.record.handled_request:
        return f"requested (etcd.io/rotate-ca: {request})"
    ca = state.ca
    if now >= ca.issued_at + AUTO_ROTATE_AT * (ca.not_after - ca.issued_at):
        return f"the CA has lived {AUTO_ROTATE_AT:.0%} of its life"
    return ""


def next_step(
    state: CertificateState, request: str, now: float, *, members_in_step: bool
) -> CaDecision | None:
    """The store change to make now, if any. `members_in_step`: every member runs healthy and
    started with the store's current trust material (its digest is `state.trust`)."""
    current = phase(state)
    if current is CaPhase.BUNDLED:
        if members_in_step:
            return CaDecision(CaStep.SWITCH, "every member trusts the new CA")
        return None
    if current is CaPhase.SWITCHED:
        if not state.leaves_by_signer:  # a switch cut short: re-sign the rest
            return CaDecision(CaStep.SWITCH, "leaves of the old CA remain")
        if members_in_step:
            return CaDecision(CaStep.DROP, "every member presents a leaf of the new CA")
        return None
    if rotating(state):
        return (
            CaDecision(CaStep.FINISH, "every member restarted without the old CA")
            if members_in_step
            else None
        )
    why = wanted(state, request, now)
    return CaDecision(CaStep.BEGIN, why) if why else None

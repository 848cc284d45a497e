"""When a TLS cluster's leaf certificates are renewed, and what status.tls and the
CertificatesValid condition say about them. Pure: the certificates' dates, the spec and `now`
come in (unix seconds); reading and writing certificates is a `CertificateStore`'s (actors/ports.py),
the timing and the Events the renewal child's (actors/renewal.py).

A leaf is renewed once less than renewBefore of its life is left, and at once when it expired
already (a supervisor down longer than the leaf's life): the same CA signs it again, so nothing
that trusts the CA notices. The CA is rotated by actors/ca_rotation.py (at 80% of its life, or
on request); one expiring within renewBefore all the same is reported (CertificatesValid False).
"""

from __future__ import annotations

from attrs import frozen

from actors.model import CertificatesSpec, Condition, LastRotation, RotationKind, TlsStatus

CONDITION = "CertificatesValid"
# Never sleep longer than this between looks: a spec edit (a longer renewBefore) or a store
# edited behind our back (a restored directory, a hand-replaced Secret) is seen within a minute.
LONGEST_SLEEP = 60.0
# A leaf issued this long after its CA was renewed, not made with it.
RENEWED_AFTER = 60.0


@frozen
class Certificate:
    """One certificate's name in its store and its dates (unix seconds). `issued_at` is when
    it was signed, not its notBefore: the issuer backdates notBefore against clock skew."""

    name: str
    issued_at: float
    not_after: float


@frozen
class RotationRecord:
    """What a store remembers of CA rotations (unix seconds; None: never): the last
    `etcd.io/rotate-ca` value acted on, when the last rotation began and when it completed."""

    handled_request: str | None = None
    begun_at: float | None = None
    completed_at: float | None = None


@frozen
class CertificateState:
    """What a cluster's certificate store holds: the CA that signs (`ca`), the leaves, and the
    CA rotation's traces (actors/ca_rotation.py): how many CAs the trust bundle holds, whether a
    new CA is made but not yet signing, whether every leaf is signed by `ca`, and the digest of
    the trust material (pki.trust_digest) that members must have started with."""

    ca: Certificate
    leaves: tuple[Certificate, ...]
    trusted: int = 1
    pending_ca: bool = False
    leaves_by_signer: bool = True
    trust: str = ""
    record: RotationRecord = RotationRecord()

    def earliest_leaf(self) -> Certificate | None:
        return min(self.leaves, key=lambda c: c.not_after, default=None)


@frozen
class TlsReport:
    """What the renewal child last saw, for assess(): the store's state, why the last renewal
    failed ("" when it did not), and the last renewal it made."""

    # None only for certificates the user brings that were never usable (no copy yet): then
    # there is a failure to say and no dates to report.
    state: CertificateState | None
    failure: str = ""
    last_rotation: LastRotation | None = None
    # The user's Secret (spec.security.tls.secretRef) the certificates come from, or the
    # cert-manager issuer (issuerRef, then `issued`, e.g. "cert-manager Issuer ca-issuer"); ""
    # when the supervisor generates, renews and rotates them.
    source: str = ""
    issued: bool = False


# When one leaf is due, the leaves due within this share of validity are renewed with it: leaves
# made a few seconds apart (the client's, then each member's) then stay in step, one renewal
# (one Event, one status change) for all of them rather than one each.
ALONG_SHARE = 0.1


def _renewable(state: CertificateState) -> list[Certificate]:
    # A leaf that already lives as long as its CA gains nothing from a renewal (pki.reissue never
    # signs past the CA): only a new CA helps, and CertificatesValid says so (CAExpiring).
    return [c for c in state.leaves if c.not_after < state.ca.not_after]


def due(state: CertificateState, spec: CertificatesSpec, now: float) -> tuple[str, ...]:
    """The leaves to renew now: none while every leaf has more than renewBefore left; else the
    ones at renewBefore or less (or expired), and those due within ALONG_SHARE of validity."""
    left = spec.renew_before_seconds
    renewable = _renewable(state)
    if not any(c.not_after - now <= left for c in renewable):
        return ()
    along = left + ALONG_SHARE * spec.validity_seconds
    return tuple(c.name for c in renewable if c.not_after - now <= along)


def seconds_until_due(state: CertificateState, spec: CertificatesSpec, now: float) -> float:
    """How long until the earliest renewable leaf is due (0: now), at most LONGEST_SLEEP."""
    renewable = _renewable(state)
    if not renewable:
        return LONGEST_SLEEP
    earliest = min(c.not_after for c in renewable)
    return min(LONGEST_SLEEP, max(0.0, earliest - spec.renew_before_seconds - now))


def tls_status(report: TlsReport) -> TlsStatus:
    """status.tls. The last rotation is the one the renewal child made; before it made one (a
    supervisor just restarted), it is read from the certificates themselves: the newest leaf,
    when signed well after its CA (a member added later counts too: a bound, not a record)."""
    state = report.state
    assert state is not None, "status.tls is made from a report with certificates"
    earliest = state.earliest_leaf()
    newest = max((c.issued_at for c in state.leaves), default=state.ca.issued_at)
    candidates = [report.last_rotation]
    if newest - state.ca.issued_at > RENEWED_AFTER:
        candidates.append(LastRotation(RotationKind.LEAF, newest))
    if state.record.completed_at is not None:
        candidates.append(LastRotation(RotationKind.CA, state.record.completed_at))
    rotation = max((c for c in candidates if c is not None), key=lambda c: c.completion_time, default=None)
    return TlsStatus(
        ca_not_after=state.ca.not_after,
        leaf_not_after=earliest.not_after if earliest else state.ca.not_after,
        last_rotation=rotation,
    )


def certificates_condition(report: TlsReport, spec: CertificatesSpec, now: float) -> Condition:
    """True while every certificate is valid and renewable; False with the reason when one
    expired, when a due leaf could not be renewed, or when the CA expires within renewBefore
    (it is not rotated automatically yet)."""
    if report.source:
        return _brought_condition(report, spec, now)
    state = report.state
    if state is None:  # the renewal child reports generated certificates once it read them
        return Condition(CONDITION, "False", "RenewalFailed", report.failure or "no certificates read yet")
    expired = sorted(c.name for c in (state.ca, *state.leaves) if c.not_after <= now)
    if expired:
        what = ", ".join(expired)
        why = f": renewal failed: {report.failure}" if report.failure else "; renewing"
        return Condition(CONDITION, "False", "CertificateExpired", f"expired: {what}{why}")
    if report.failure:  # the child renews only what is due: a failure is a due leaf not renewed
        return Condition(CONDITION, "False", "RenewalFailed", f"renewal failed: {report.failure}")
    if state.ca.not_after - now < spec.renew_before_seconds:
        return Condition(
            CONDITION,
            "False",
            "CAExpiring",
            f"the CA expires within renewBefore ({spec.renew_before or 'a third of validity'}) and its"
            " rotation (due at 80% of its life) has not completed: leaves cannot be renewed past it",
        )
    return Condition(CONDITION, "True", "Valid", "")


def _brought_condition(report: TlsReport, spec: CertificatesSpec, now: float) -> Condition:
    """Certificates the user brings (or cert-manager issues): theirs to renew; said when
    unusable (for cert-manager: a Certificate not Ready, with its reason), expired or expiring
    within renewBefore (a third of the default validity: 30 days)."""
    where = report.source if report.issued else f"Secret {report.source}"
    state = report.state
    if report.failure or state is None:
        reason = "CertificateNotReady" if report.issued else "SecretInvalid"
        return Condition(CONDITION, "False", reason, report.failure or f"no usable copy of {where}")
    expired = sorted(c.name for c in (state.ca, *state.leaves) if c.not_after <= now)
    if expired:
        what = ", ".join(expired)
        fix = f"not renewed by {where}" if report.issued else f"replace it in {where}"
        return Condition(CONDITION, "False", "CertificateExpired", f"expired: {what}: {fix}")
    soon = sorted(c.name for c in (state.ca, *state.leaves) if c.not_after - now < spec.renew_before_seconds)
    if soon and not report.issued:  # cert-manager renews at its own renewBefore, the spec's
        what = ", ".join(soon)
        return Condition(
            CONDITION, "False", "ExpiringSoon", f"{what} expires within renewBefore: renew it in {where}"
        )
    return Condition(CONDITION, "True", "Valid", f"from {where}")

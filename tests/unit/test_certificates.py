"""actors/certificates.py: when leaves are renewed, and what status.tls and CertificatesValid say."""

import pytest

from actors.certificates import (
    LONGEST_SLEEP,
    Certificate,
    CertificateState,
    TlsReport,
    certificates_condition,
    due,
    seconds_until_due,
    tls_status,
)
from actors.model import CertificatesSpec, LastRotation, RotationKind

NOW = 2_000_000_000.0
HOUR = 3600.0
DAY = 24 * HOUR
SPEC = CertificatesSpec(validity="2160h")  # 90 days, renewBefore a third: 30 days
CA = Certificate("ca", NOW - 100 * DAY, NOW + 3000 * DAY)


def state(
    *leaves: tuple[str, float], issued: float = NOW - 100 * DAY, ca: Certificate = CA
) -> CertificateState:
    return CertificateState(ca, tuple(Certificate(name, issued, NOW + left) for name, left in leaves))


def test_renew_before_defaults_to_a_third_of_validity() -> None:
    assert SPEC.renew_before_seconds == 30 * DAY
    assert CertificatesSpec(validity="40s", renew_before="25s").renew_before_seconds == 25


def test_only_leaves_with_less_than_renew_before_left_are_due() -> None:
    held = state(("demo-0", 45 * DAY), ("demo-1", 29 * DAY), ("client", 60 * DAY))
    assert due(held, SPEC, NOW) == ("demo-1",)


def test_leaves_nearly_due_are_renewed_with_a_due_one_to_stay_in_step() -> None:
    # validity 90 days: a tenth is 9 days; demo-0 would be due in 5 days, demo-2 in 10.
    held = state(("client", 29 * DAY), ("demo-0", 35 * DAY), ("demo-2", 40 * DAY))
    assert due(held, SPEC, NOW) == ("client", "demo-0")
    assert due(state(("demo-0", 35 * DAY)), SPEC, NOW) == ()


def test_a_leaf_that_lives_as_long_as_its_ca_is_not_renewed_again_and_again() -> None:
    # The CA ends in 10 days: a renewal cannot give more (pki.reissue stops at the CA's end).
    ca = Certificate("ca", NOW - DAY, NOW + 10 * DAY)
    held = state(("demo-0", 10 * DAY), ("client", 5 * DAY), ca=ca)
    assert due(held, SPEC, NOW) == ("client",)
    at_the_end = state(("demo-0", 10 * DAY), ca=ca)
    assert due(at_the_end, SPEC, NOW) == ()
    assert seconds_until_due(at_the_end, SPEC, NOW) == LONGEST_SLEEP


def test_an_expired_leaf_is_due_at_once() -> None:
    # The supervisor was down longer than the leaf's life: renewed as soon as it looks.
    held = state(("demo-0", -5 * DAY))
    assert due(held, SPEC, NOW) == ("demo-0",)
    assert seconds_until_due(held, SPEC, NOW) == 0


def test_the_child_sleeps_until_the_earliest_leaf_is_due_at_most_a_while() -> None:
    held = state(("demo-0", 30 * DAY + 20), ("demo-1", 60 * DAY))
    assert seconds_until_due(held, SPEC, NOW) == 20
    assert seconds_until_due(state(("demo-0", 80 * DAY)), SPEC, NOW) == LONGEST_SLEEP
    assert seconds_until_due(state(), SPEC, NOW) == LONGEST_SLEEP


def test_status_names_the_earliest_leaf_and_no_rotation_while_the_leaves_are_the_first() -> None:
    held = state(("demo-0", 80 * DAY), ("client", 70 * DAY), issued=CA.issued_at)
    status = tls_status(TlsReport(held))
    assert status.ca_not_after == CA.not_after
    assert status.leaf_not_after == NOW + 70 * DAY
    assert status.last_rotation is None


def test_a_leaf_signed_after_its_ca_is_the_last_rotation() -> None:
    held = CertificateState(
        CA,
        (Certificate("demo-0", CA.issued_at, NOW + DAY), Certificate("client", NOW - HOUR, NOW + 90 * DAY)),
    )
    assert tls_status(TlsReport(held)).last_rotation == LastRotation(RotationKind.LEAF, NOW - HOUR)
    # The renewal the child made is the record, when it made one.
    made = LastRotation(RotationKind.LEAF, NOW)
    assert tls_status(TlsReport(held, last_rotation=made)).last_rotation == made


def test_valid_certificates_are_true() -> None:
    condition = certificates_condition(TlsReport(state(("demo-0", 40 * DAY))), SPEC, NOW)
    assert (condition.type, condition.status, condition.reason) == ("CertificatesValid", "True", "Valid")


@pytest.mark.parametrize(
    ("report", "reason", "words"),
    [
        (TlsReport(state(("demo-0", -HOUR))), "CertificateExpired", "expired: demo-0; renewing"),
        (
            TlsReport(state(("demo-0", -HOUR)), failure="disk full"),
            "CertificateExpired",
            "renewal failed: disk full",
        ),
        (
            TlsReport(state(("demo-0", 10 * DAY)), failure="permission denied"),
            "RenewalFailed",
            "renewal failed: permission denied",
        ),
        (
            TlsReport(state(("demo-0", 60 * DAY), ca=Certificate("ca", NOW - DAY, NOW + 20 * DAY))),
            "CAExpiring",
            "rotation (due at 80% of its life) has not completed",
        ),
        (
            TlsReport(state(("demo-0", 60 * DAY), ca=Certificate("ca", NOW - DAY, NOW - 1))),
            "CertificateExpired",
            "expired: ca",
        ),
    ],
)
def test_a_certificate_expired_or_not_renewable_is_false_with_the_reason(
    report: TlsReport, reason: str, words: str
) -> None:
    condition = certificates_condition(report, SPEC, NOW)
    assert (condition.status, condition.reason) == ("False", reason)
    assert words in condition.message


def test_a_due_leaf_being_renewed_is_still_valid() -> None:
    # Due but not failed: the renewal child renews it within the look; nothing to alarm anyone.
    assert certificates_condition(TlsReport(state(("demo-0", DAY))), SPEC, NOW).status == "True"

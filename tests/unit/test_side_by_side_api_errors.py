"""What API calls made side by side (in a nursery) amount to when they fail: one error, as a
single call would have raised, so that callers written for one call keep working."""

from __future__ import annotations

from actors.errors import RuntimeRefused
from supervisor.kube.client import KubeError, KubeUnavailable
from supervisor.kube.refusals import api_error_in, refusal_in


def group(*errors: BaseException) -> BaseExceptionGroup[BaseException]:
    return BaseExceptionGroup("side by side", list(errors))


def test_the_api_server_away_wins_over_any_answer() -> None:
    away = KubeUnavailable("connection refused")
    assert api_error_in(group(KubeError(403, "Forbidden"), away)) is away
    assert refusal_in(group(KubeError(403, "Forbidden"), away)) is away


def test_answers_only_amount_to_the_first_answer_or_one_refusal_naming_all() -> None:
    forbidden, gone = KubeError(403, "Forbidden"), KubeError(404, "NotFound")
    nested = group(forbidden, group(gone))
    assert api_error_in(nested) is forbidden
    refusal = refusal_in(nested)
    assert isinstance(refusal, RuntimeRefused)
    assert "403 Forbidden" in str(refusal) and "404 NotFound" in str(refusal)


def test_anything_but_api_errors_is_left_as_it_was() -> None:
    mixed = group(KubeError(403, "Forbidden"), ValueError("a bug"))
    assert api_error_in(mixed) is None
    assert refusal_in(mixed) is None


def test_a_refusal_of_our_own_side_by_side_is_a_refusal() -> None:
    alone = refusal_in(group(RuntimeRefused("issuerRef: no Issuer nope")))
    assert isinstance(alone, RuntimeRefused) and "no Issuer nope" in str(alone)
    both = refusal_in(group(RuntimeRefused("issuerRef: no Issuer nope"), KubeError(403, "Forbidden")))
    assert isinstance(both, RuntimeRefused) and "403 Forbidden" in str(both)
    assert refusal_in(group(RuntimeRefused("x"), ValueError("a bug"))) is None

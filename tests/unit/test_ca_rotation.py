"""A CA rotation's phases: the pure decision (actors/ca_rotation.py) over the material each
phase leaves (supervisor/ca_material.py), including material a crash left half-changed."""

from __future__ import annotations

import datetime as dt

import attrs
import pytest
from cryptography import x509

from actors.ca_rotation import CaPhase, CaStep, next_step, phase, rotating
from actors.certificates import CertificateState, RotationRecord
from supervisor import ca_material, pki

NOW = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
DAY = 86400.0


def fresh_material() -> ca_material.Material:
    ca = pki.new_ca("etcd-ca demo", now=NOW, lifetime=dt.timedelta(days=100), unit="default")
    leaves = {
        name: pki.issue(ca, name, now=NOW, lifetime=dt.timedelta(days=10), server_auth=True, client_auth=True)
        for name in ("member", "client")
    }
    return ca_material.Material(
        bundle=ca.cert_pem(), signer_key=ca.key_pem(), leaves={n: p.cert_pem() for n, p in leaves.items()}
    )


NEVER = RotationRecord()


def read(material: ca_material.Material, record: RotationRecord = NEVER) -> CertificateState:
    return ca_material.state(material, record)


def test_each_phase_changes_the_trust_digest_and_the_last_trusts_only_the_new_ca() -> None:
    start = fresh_material()
    old_signer = start.signer().cert
    begun = ca_material.begun(start, now=NOW, lifetime=200 * DAY)
    switched = ca_material.switched(begun, now=NOW, lifetime=10 * DAY)
    dropped = ca_material.dropped(switched)
    states = [read(m) for m in (start, begun, switched, dropped)]
    assert [phase(s) for s in states] == [CaPhase.STEADY, CaPhase.BUNDLED, CaPhase.SWITCHED, CaPhase.STEADY]
    assert len({s.trust for s in states}) == 4, "a member must restart at every phase"
    assert [s.trusted for s in states] == [1, 2, 2, 1]
    # The new CA trusted from BEGIN on, signing from SWITCH on; the old one gone at the end.
    new_ca = begun.pending()
    assert new_ca is not None and pki.load_bundle(begun.bundle) == [old_signer, new_ca.cert]
    assert begun.signer().cert == old_signer
    assert switched.signer().cert == new_ca.cert and switched.pending() is None
    assert pki.load_bundle(dropped.bundle) == [new_ca.cert]
    for pem in dropped.leaves.values():
        leaf = x509.load_pem_x509_certificate(pem)
        assert pki.signed_by(leaf, new_ca.cert)
    # The new CA is told apart by name and keeps the cluster's unit.
    assert new_ca.cert.subject != old_signer.subject
    assert (
        "rotated" in new_ca.cert.subject.rfc4514_string()
        and "OU=default" in new_ca.cert.subject.rfc4514_string()
    )
    assert states[2].ca.not_after > states[0].ca.not_after


def test_keys_stay_through_a_rotation_so_a_pair_on_disk_is_always_whole() -> None:
    start = fresh_material()
    end = ca_material.dropped(
        ca_material.switched(ca_material.begun(start, now=NOW, lifetime=DAY), now=NOW, lifetime=DAY)
    )
    for name, pem in start.leaves.items():
        before = x509.load_pem_x509_certificate(pem).public_key()
        assert x509.load_pem_x509_certificate(end.leaves[name]).public_key() == before


def test_a_switch_cut_short_is_taken_up_again() -> None:
    begun = ca_material.begun(fresh_material(), now=NOW, lifetime=DAY)
    # A crash after the leaves were re-signed, before the key moved: still BUNDLED, so the
    # switch runs again once the members trust the bundle.
    pending = begun.pending()
    assert pending is not None
    half = ca_material._resigned(begun, pending, ("member",), now=NOW, lifetime=DAY)
    assert phase(read(half)) is CaPhase.BUNDLED
    resumed = next_step(read(half), "", NOW.timestamp(), members_in_step=True)
    assert resumed is not None and resumed.step is CaStep.SWITCH
    # A crash after the key moved, before the new CA's own files went: SWITCHED, nothing pending.
    moved = attrs.evolve(
        ca_material.switched(begun, now=NOW, lifetime=DAY), next_cert=begun.next_cert, next_key=begun.next_key
    )
    assert phase(read(moved)) is CaPhase.SWITCHED
    # A BEGIN repeated after a crash keeps the CA it made (members may trust it already).
    again = ca_material.begun(begun, now=NOW, lifetime=DAY)
    assert again.bundle == begun.bundle and again.next_key == begun.next_key


@pytest.mark.parametrize(
    ("changes", "request_value", "in_step", "expected"),
    [
        ((), "", True, None),  # steady, nothing asked
        ((), "one", True, CaStep.BEGIN),  # a value never acted on
        (("begun",), "one", False, None),  # members not restarted with the bundle yet
        (("begun",), "one", True, CaStep.SWITCH),
        (("begun", "switched"), "one", False, None),
        (("begun", "switched"), "one", True, CaStep.DROP),
        (("begun", "switched", "dropped"), "one", False, None),  # restarts after the drop
        (("begun", "switched", "dropped"), "one", True, CaStep.FINISH),
    ],
)
def test_the_next_step_follows_the_store_and_waits_for_the_members(
    changes: tuple[str, ...], request_value: str, in_step: bool, expected: CaStep | None
) -> None:
    material = fresh_material()
    record = RotationRecord()
    if changes:
        record = RotationRecord(handled_request="one", begun_at=NOW.timestamp())
    for change in changes:
        step = getattr(ca_material, change)
        material = step(material) if change == "dropped" else step(material, now=NOW, lifetime=DAY)
    decision = next_step(read(material, record), request_value, NOW.timestamp() + 1, members_in_step=in_step)
    assert (decision.step if decision else None) is expected


def test_a_finished_rotation_is_not_begun_again_until_asked_anew() -> None:
    done = RotationRecord(handled_request="one", begun_at=100.0, completed_at=200.0)
    state = read(fresh_material(), done)
    assert not rotating(state)
    assert next_step(state, "one", NOW.timestamp(), members_in_step=True) is None
    decision = next_step(state, "two", NOW.timestamp(), members_in_step=True)
    assert decision is not None and decision.step is CaStep.BEGIN and "two" in decision.why


def test_a_ca_at_four_fifths_of_its_life_is_rotated_without_being_asked() -> None:
    state = read(fresh_material())  # a CA of 100 days, made at NOW
    before = NOW.timestamp() + 79 * DAY
    after = NOW.timestamp() + 81 * DAY
    assert next_step(state, "", before, members_in_step=True) is None
    decision = next_step(state, "", after, members_in_step=True)
    assert decision is not None and decision.step is CaStep.BEGIN and "80%" in decision.why

"""corrected(): which fields of a cluster's objects the operator sets back, and which it leaves."""

from __future__ import annotations

import copy
from typing import Any

from supervisor.kube import cluster_objects as objects
from supervisor.kube import manifests as m
from tests.unit.test_kube_manifests import OWNER


def live(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """`obj` as the API server has it: with what it assigns, and `spec` edited."""
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = "7"
    out["metadata"]["uid"] = "svc-uid"
    out["spec"].update(spec)
    return out


def test_nothing_drifted_nothing_is_written() -> None:
    service = m.client_service(OWNER)
    seen = live(service, clusterIP="10.0.0.7", sessionAffinity="None")
    assert objects.corrected(seen, service, objects.client_service().owned, OWNER) is None


def test_owned_fields_are_set_back_and_the_api_servers_kept() -> None:
    service = m.peer_service(OWNER)
    seen = live(service, publishNotReadyAddresses=False, selector={"app": "x"}, sessionAffinity="None")
    seen["metadata"]["labels"]["team"] = "storage"
    fixed = objects.corrected(seen, service, objects.peer_service().owned, OWNER)
    assert fixed is not None
    assert fixed["spec"]["publishNotReadyAddresses"] is True
    assert fixed["spec"]["selector"] == m.peer_record_selector(OWNER.ref)
    assert fixed["spec"]["sessionAffinity"] == "None"
    assert fixed["metadata"]["resourceVersion"] == "7"  # the update is a compare-and-swap
    assert fixed["metadata"]["labels"]["team"] == "storage"


def test_an_owned_field_the_manifest_leaves_out_is_removed() -> None:
    budget = m.disruption_budget(OWNER, 2)
    seen = live(budget, maxUnavailable=1)  # an earlier version's budget
    del seen["spec"]["minAvailable"]
    fixed = objects.corrected(seen, budget, objects.disruption_budget(2).owned, OWNER)
    assert fixed is not None
    assert fixed["spec"]["minAvailable"] == 2 and "maxUnavailable" not in fixed["spec"]


def test_the_owner_becomes_this_incarnation_and_other_owners_stay() -> None:
    secret = m.tls_secret(OWNER, {})
    seen = copy.deepcopy(m.tls_secret(OWNER, {"ca.crt": "Y2E="}))
    earlier = {**m.owner_reference(OWNER), "uid": "an-earlier-incarnation"}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm-uid"}
    seen["metadata"]["ownerReferences"] = [earlier, other]
    fixed = objects.corrected(seen, secret, (), OWNER)
    assert fixed is not None
    assert fixed["metadata"]["ownerReferences"] == [other, m.owner_reference(OWNER)]
    assert fixed["data"] == {"ca.crt": "Y2E="}  # the keys are not the operator's to set again

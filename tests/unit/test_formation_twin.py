"""The bench's like-for-like reference (tests/harness/formation.twin_members): the operator's own
member pods, started at once, that no operator takes for its members."""

from __future__ import annotations

from actors.codec import parse_spec
from actors.model import ClusterRef, MemberLaunch
from supervisor.kube import manifests as m
from tests.harness.formation import STATIC_LABELS, STATIC_NAMES, etcd_cluster, twin_members


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def test_the_pods_are_the_operators_member_pods_with_the_whole_membership_at_once() -> None:
    objects = twin_members("ns", "3.5.35", tls=True)
    pods = by_kind(objects, "Pod")
    assert [p["metadata"]["name"] for p in pods] == STATIC_NAMES
    ref = ClusterRef("ns", "static")
    urls = {n: m.member_urls(ref, n, tls=True) for n in STATIC_NAMES}
    launch = MemberLaunch(
        ref,
        "static-0",
        urls["static-0"],
        tuple((n, u.peer_url) for n, u in urls.items()),
        "new",
        parse_spec(etcd_cluster("static", "3.5.35", tls=True)["spec"]),
    )
    operators = m.member_pod(m.Owner(ref, uid="static"), launch)
    assert pods[0]["spec"]["containers"] == operators["spec"]["containers"]
    assert pods[0]["spec"]["volumes"] == operators["spec"]["volumes"]
    assert by_kind(objects, "Secret") and len(by_kind(objects, "PersistentVolumeClaim")) == 3


def test_no_operator_owns_or_selects_them() -> None:
    objects = twin_members("ns", "3.5.35", tls=False)
    assert not by_kind(objects, "Secret")
    for obj in objects:
        assert "ownerReferences" not in obj["metadata"]
        assert obj["metadata"]["labels"] == STATIC_LABELS
    (service,) = by_kind(objects, "Service")
    assert service["spec"]["selector"] == STATIC_LABELS  # its DNS names are the pods'

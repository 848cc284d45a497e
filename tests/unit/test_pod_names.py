"""Short names of an adopted cluster's members (supervisor/kube/pod_names.py): the names a pod
in the EtcdCluster's namespace tries, in its resolver's order, and the names left as they are."""

import pytest

from supervisor.kube.pod_names import search_names


def test_a_short_name_is_tried_under_the_clusters_namespace_first_as_its_pods_do() -> None:
    assert search_names("old-0.old", "shop", "cluster.local") == [
        "old-0.old.shop.svc.cluster.local",
        "old-0.old.svc.cluster.local",
        "old-0.old.cluster.local",
    ]
    # `<pod>.<service>.<namespace>`: another namespace's, found second.
    assert search_names("old-0.old.legacy", "shop", "corp")[1] == "old-0.old.legacy.svc.corp"


@pytest.mark.parametrize(
    "host",
    [
        "10.1.2.3",
        "fd00::1",
        "old-0.old.shop.svc.cluster.local",  # qualified already
        "etcd.example.com.",  # absolute
        "a.b.c.d.e.f",  # as many dots as ndots: tried as it is first, as a pod would
        "",
    ],
)
def test_addresses_and_qualified_names_are_left_to_the_usual_resolution(host: str) -> None:
    assert search_names(host, "shop", "cluster.local") == []


def test_a_name_under_the_cluster_domain_is_qualified_whatever_its_dots() -> None:
    # A member of ours under a one-label domain: its address is the runtime's to record.
    assert search_names("demo-0.demo-peer.shop.svc.corp", "shop", "corp") == []

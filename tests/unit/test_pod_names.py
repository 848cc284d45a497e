"""Short names of an adopted cluster's members (supervisor/kube/pod_names.py): the names a pod
in the EtcdCluster's namespace tries, in its resolver's order, and the names left as they are."""

import pytest

from supervisor.kube.pod_names import search_names, with_host


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


def test_a_url_is_dialled_by_the_qualified_name_its_port_and_scheme_kept() -> None:
    qualified = "old-0.old.shop.svc.cluster.local"
    assert with_host("http://old-0.old:2379", qualified) == f"http://{qualified}:2379"
    assert with_host("https://old-0.old", qualified) == f"https://{qualified}"
    assert with_host("http://old-0.old:2379", "old-0.old") == "http://old-0.old:2379"

"""Spec changes a running cluster refuses, whatever the document says on its own."""

from actors.model import AdoptSpec, ClusterSpec, StorageSpec
from actors.spec_changes import refused_changes


def fields(current: ClusterSpec, wanted: ClusterSpec) -> set[str]:
    return {e.field for e in refused_changes(current, wanted)}


def test_size_repository_and_upgrades_are_allowed():
    current = ClusterSpec(size=3, version="3.5.9")
    assert fields(current, ClusterSpec(size=5, version="3.5.21", repository="bitnami/etcd")) == set()
    assert fields(current, ClusterSpec(version="3.6.0-rc.1")) == set()


def test_a_skipped_minor_or_another_major_is_refused_naming_the_step_to_take():
    (error,) = refused_changes(ClusterSpec(version="3.4.25"), ClusterSpec(version="3.6.16"))
    assert error.field == "spec.version"
    assert "cannot skip a minor version" in str(error) and "upgrade to 3.5 first" in str(error)
    assert fields(ClusterSpec(version="3.6.16"), ClusterSpec(version="4.0.0")) == {"spec.version"}


def test_tls_cannot_be_switched_on_a_running_cluster():
    assert fields(ClusterSpec(tls_enabled=False), ClusterSpec(tls_enabled=True)) == {
        "spec.security.tls.enabled"
    }


def test_storage_changes_are_accepted_they_replace_the_members_one_at_a_time():
    current = ClusterSpec(storage=StorageSpec(storage_class_name="fast"))
    assert fields(current, ClusterSpec(storage=StorageSpec(storage_class_name="slow"))) == set()
    assert fields(current, ClusterSpec(storage=StorageSpec(size="20Gi"))) == set()


def test_3_6_to_3_7_and_back_are_allowed_but_two_minors_either_way_are_refused():
    assert fields(ClusterSpec(version="3.6.16"), ClusterSpec(version="3.7.3")) == set()
    assert fields(ClusterSpec(version="3.7.3"), ClusterSpec(version="3.6.16")) == set()
    (skip,) = refused_changes(ClusterSpec(version="3.5.35"), ClusterSpec(version="3.7.3"))
    assert "cannot skip a minor version" in str(skip) and "upgrade to 3.6 first" in str(skip)
    (back,) = refused_changes(ClusterSpec(version="3.7.3"), ClusterSpec(version="3.5.35"))
    assert "cannot go back from 3.7.3 to 3.5.35" in str(back) and "one minor at a time" in str(back)


def test_minor_downgrades_are_refused_but_3_6_to_3_5_and_patch_downgrades_are_not():
    assert fields(ClusterSpec(version="3.5.21"), ClusterSpec(version="3.4.30")) == {"spec.version"}
    assert fields(ClusterSpec(version="3.6.16"), ClusterSpec(version="3.4.25")) == {"spec.version"}
    assert fields(ClusterSpec(version="3.5.21"), ClusterSpec(version="3.5.9")) == set()
    # etcd's downgrade API (3.6+) takes the cluster version down one minor.
    assert fields(ClusterSpec(version="3.6.16"), ClusterSpec(version="3.5.35")) == set()


OLD = AdoptSpec(endpoints=("http://old-0.old:2379",))


def test_adopt_cannot_be_added_to_an_existing_cluster_it_is_read_at_creation():
    (error,) = refused_changes(ClusterSpec(), ClusterSpec(adopt=OLD))
    assert error.field == "spec.adopt"
    assert "cannot be added to an existing cluster" in error.rule
    assert "read only while the cluster is created" in error.rule


def test_adopt_cannot_change_or_go_on_an_existing_cluster_but_remove_old_may():
    for changed in (
        AdoptSpec(endpoints=("http://old-1.old:2379",)),
        AdoptSpec(endpoints=OLD.endpoints, peer_ca_secret="old-peer-ca"),
    ):
        (error,) = refused_changes(ClusterSpec(adopt=OLD), ClusterSpec(adopt=changed))
        assert error.field == "spec.adopt" and "cannot change on an existing cluster" in error.rule
    (error,) = refused_changes(ClusterSpec(adopt=OLD), ClusterSpec())
    assert error.field == "spec.adopt" and "cannot be removed from an existing cluster" in error.rule
    retire = AdoptSpec(endpoints=OLD.endpoints, remove_old=True)
    assert fields(ClusterSpec(adopt=OLD), ClusterSpec(adopt=retire)) == set()
    assert fields(ClusterSpec(adopt=OLD), ClusterSpec(adopt=OLD, size=5)) == set()

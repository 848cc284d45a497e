"""Reading the manifest file (pure): what a read asks for, and which reads may remove a cluster."""

from __future__ import annotations

from actors.model import ClusterRef
from supervisor.local.clusters_file import EMPTY, FileProblem, Manifest, Removals, read_clusters
from supervisor.local.manifest import Unreadable

DEMO = ClusterRef("default", "demo")
OTHER = ClusterRef("apps", "cache")

GOOD = """\
apiVersion: etcd.io/v1alpha1
kind: EtcdCluster
metadata: {name: demo}
spec: {size: 3}
---
apiVersion: etcd.io/v1alpha1
kind: EtcdCluster
metadata: {name: cache, namespace: apps}
spec: {size: 0}
"""


def test_a_good_file_names_its_clusters_valid_or_not() -> None:
    read = read_clusters(GOOD)
    assert isinstance(read, Manifest)
    assert [r.ref for r in read.resources] == [DEMO]
    assert read.invalid == {OTHER: "spec.size: must be between 1 and 9 (got 0)"}
    assert read.unnamed == () and read.names() == {DEMO, OTHER}


def test_files_that_cannot_be_used_say_why_and_where() -> None:
    assert read_clusters(Unreadable("Permission denied")) == FileProblem("Permission denied")
    assert read_clusters("") == FileProblem(EMPTY)
    assert read_clusters("# nothing yet\n---\n") == FileProblem(EMPTY)
    broken = read_clusters("metadata:\n  name: demo\n spec: [\n")
    assert isinstance(broken, FileProblem)
    assert broken.reason.startswith("not valid YAML: line 3, column 2: ")
    assert "\n" not in broken.reason
    binary = read_clusters("size: 1\nab\x01garbage")
    assert binary == FileProblem("not valid YAML: line 2, column 3: character #x0001 is not allowed")


def test_a_document_naming_no_cluster_is_kept_apart() -> None:
    # An editor's half-written file: the cut fell inside the metadata of the second document.
    half = GOOD.split("metadata: {name: cache")[0]
    cut_in_a_key = read_clusters(half + "metad")
    assert isinstance(cut_in_a_key, FileProblem)
    assert cut_in_a_key.reason.startswith("not valid YAML: line 8, column 6: could not find expected ':'")
    read = read_clusters(half + "metadata:\n")
    assert isinstance(read, Manifest)
    assert [r.ref for r in read.resources] == [DEMO]
    assert read.invalid == {} and len(read.unnamed) == 1
    assert "document 1" in read.unnamed[0] and "metadata.name" in read.unnamed[0]
    # Garbage that happens to be YAML, and a namespace that cannot be a directory.
    assert read_clusters("just some words").unnamed[0].startswith("document 0: (document): must be")  # type: ignore[union-attr]
    sneaky = GOOD.replace("namespace: apps", "namespace: ../up").replace("size: 0", "size: 1")
    read = read_clusters(sneaky)
    assert isinstance(read, Manifest) and [r.ref for r in read.resources] == [DEMO]
    assert read.unnamed == (
        "document (cache): metadata.namespace: must be a DNS label: lowercase letters,"
        " digits and '-', at most 63 characters (got '../up')",
    )


def test_a_cluster_is_removed_only_when_a_second_read_later_still_lacks_it() -> None:
    removals = Removals(confirm_after=2.0)
    assert removals.due({DEMO}, now=10.0) == set()
    assert removals.next_check() == 12.0
    assert removals.due({DEMO}, now=11.0) == set()  # still lacking, too soon
    assert removals.due(set(), now=11.5) == set()  # back in the file: the count starts over
    assert removals.next_check() is None
    assert removals.due({DEMO, OTHER}, now=12.0) == set()
    assert removals.due({DEMO}, now=14.0) == {DEMO}
    removals.hold()  # a read that could not be trusted
    assert removals.next_check() is None
    assert removals.due({OTHER}, now=20.0) == set()


def test_etcd_backup_documents_are_read_beside_the_clusters_and_hold_nothing_back():
    backup = (
        "apiVersion: etcd.io/v1alpha1\nkind: EtcdBackup\nmetadata: {name: b1}\nspec: {clusterName: demo}\n"
    )
    broken = "apiVersion: etcd.io/v1alpha1\nkind: EtcdBackup\nmetadata: {name: b2}\nspec: {}\n"
    read = read_clusters(GOOD + "---\n" + backup + "---\n" + broken)
    assert isinstance(read, Manifest)
    assert [b.name for b in read.backups] == ["b1"] and read.backups[0].spec.cluster_name == "demo"
    assert read.unnamed == () and set(read.invalid) == {OTHER}  # an EtcdBackup is never taken for a cluster
    assert len(read.invalid_backups) == 1 and "spec.clusterName: required" in read.invalid_backups[0]

"""Which xdist worker group a test joins (tests/harness/parallel.py): a test needing a session-wide
component shares the one worker that starts it; any other test groups with its module."""

from __future__ import annotations

from tests.harness.parallel import dispatch_rank, group_of


def test_a_test_needing_a_shared_component_joins_that_component_s_group() -> None:
    assert group_of(["kube_namespace", "kube_apiserver", "tmp_path"], "tests/stores/test_credentials.py") == (
        "apiserver"
    )
    assert group_of(["e2e_namespace", "e2e_cluster"], "tests/e2e/test_members.py") == "node"
    assert group_of(["gcs_server"], "tests/stores/test_round_trip.py") == "objstore"


def test_a_tier_sharing_a_machine_wide_resource_stays_on_one_worker_whatever_it_asks_for() -> None:
    # kube tests with an API server of their own still run stand-in kubelets, whose pod
    # addresses two workers would hand out twice; store tests pick their server at run time.
    assert group_of(["private_kube_apiserver"], "tests/kube/test_leader.py") == "apiserver"
    assert group_of(["store"], "tests/stores/test_round_trip.py") == "objstore"
    assert group_of([], "tests/e2e/test_members.py") == "node"
    # The three-node tier shares the one node's worker: the two never run at once.
    assert group_of(["three_nodes"], "tests/nodes/test_nodes.py") == "node"
    assert group_of([], "tests/nodes/test_nodes.py") == "node"


def test_a_test_needing_several_components_runs_where_the_heaviest_is() -> None:
    # The e2e disaster-recovery test backs up to S3: it runs on the node's worker, which starts
    # an S3 server of its own, rather than the node starting on a second worker.
    assert group_of(["s3_server", "e2e_cluster"], "tests/e2e/test_disaster_recovery.py") == "node"


def test_any_other_test_groups_with_its_module() -> None:
    # Module-scoped etcd clusters then start once, not once per worker that runs the module.
    assert group_of(["etcd_cluster", "tmp_path"], "tests/etcd/test_kv.py") == "tests/etcd/test_kv.py"


def test_the_long_groups_are_handed_out_first() -> None:
    order = ["tests/unit/test_plan.py", "objstore", "tests/chaos/test_chaos.py", "apiserver", "node"]
    assert sorted(order, key=dispatch_rank) == [
        "node",
        "apiserver",
        "tests/chaos/test_chaos.py",
        "objstore",
        "tests/unit/test_plan.py",
    ]

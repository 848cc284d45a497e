"""How `make test` spreads the suite over pytest-xdist workers without duplicating a component.

A session-wide component (the e2e node, the kube tier's API server, the object-store servers)
is a session fixture, and xdist gives every worker a session of its own: a test needing one of
them must run on the one worker that starts it. So every test gets an `xdist_group`:

- the component it needs, heaviest first: one node (or three), one API server, one moto +
  fake-gcs pair for the tiers that need no node. A test needs one if it is in that component's
  tier, whatever it asks for: tests/e2e and tests/nodes (one node or three, under one lock and
  one root in /tmp each), tests/kube (tests with an API server of their own still run the
  stand-in kubelet, whose pod addresses 127.0.0.10 and up two workers would hand out twice),
  tests/stores (their store fixtures pick the S3 or GCS server at
  run time); or if its fixture closure asks for it (transitive: a test asking for
  `kube_namespace` needs `kube_apiserver`);
- otherwise its module, so module-scoped etcd clusters start once, not once per worker.

Groups are handed out longest first (`--dist loadgroup` sends a worker one group at a time), so
the node's and the API server's long groups start at once instead of after the quick ones.
"""

from __future__ import annotations

from collections.abc import Iterable

# Each shared component, heaviest first: the tier that runs on its worker whatever its tests ask
# for, and the fixtures that mark a test elsewhere as needing it. A test needing several runs
# where the heaviest is (the e2e disaster-recovery test needs the node and S3).
COMPONENTS = (
    # The one-node tier and the three-node one (tests/nodes) share the node's lock, fixed
    # addresses of the host and its iptables: on one worker, one after the other.
    ("node", ("tests/e2e/", "tests/nodes/"), ("e2e_cluster", "three_nodes")),
    ("apiserver", ("tests/kube/",), ("kube_apiserver",)),
    ("objstore", ("tests/stores/",), ("s3_server", "gcs_server")),
)

# The order groups are handed out in: what takes longest first. Tiers without a shared
# component but with long tests (real etcd clusters under faults) come next, then the rest.
_FIRST = ("node", "apiserver", "tests/chaos/", "objstore")


def group_of(fixturenames: Iterable[str], module: str) -> str:
    """The xdist group of a test: the shared component it needs, else its module's path."""
    needed = set(fixturenames)
    for component, tier, fixtures in COMPONENTS:
        if module.startswith(tier) or needed.intersection(fixtures):
            return component
    return module


def dispatch_rank(group: str) -> int:
    """Where a group goes in the hand-out order: lower first."""
    for rank, prefix in enumerate(_FIRST):
        if group == prefix or group.startswith(prefix):
            return rank
    return len(_FIRST)

"""Which failures let the client send a change that must not apply twice to another member."""

import pytest

from supervisor.etcd.client_base import retry_if_unapplied
from supervisor.etcd.errors import (
    EtcdConnectionError,
    EtcdTimeout,
    LeaderChanged,
    NoLeader,
    ProposalDropped,
    RequestTimedOut,
    error_from_status,
)


@pytest.mark.parametrize("error", [ProposalDropped("x"), NoLeader("x"), EtcdConnectionError("x")])
def test_a_change_is_sent_again_after_a_failure_that_proves_it_was_not_applied(error):
    assert retry_if_unapplied(error)


@pytest.mark.parametrize("error", [RequestTimedOut("x"), LeaderChanged("x"), EtcdTimeout("x")])
def test_a_change_whose_outcome_is_unknown_is_left_to_the_caller(error):
    assert not retry_if_unapplied(error)


def test_raft_refusing_a_proposal_is_typed_from_its_unprefixed_message():
    # etcd passes raft's error through as gRPC status UNKNOWN with raft's own text.
    assert isinstance(error_from_status(2, "raft proposal dropped"), ProposalDropped)

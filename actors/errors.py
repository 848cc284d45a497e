"""Errors the actors tell apart. The etcd adapter maps etcd's own errors onto these."""


class EtcdError(Exception):
    """Any failed etcd operation."""


class EtcdUnavailable(EtcdError):
    """No endpoint answered in time."""


class LearnerNotReady(EtcdError):
    """etcd refused a promotion: the learner's log is not yet in sync with the leader's."""


class MemberNotFound(EtcdError):
    """The member is not (or no longer) in etcd's membership."""


class ClusterUnhealthy(EtcdError):
    """etcd refused a membership change that would put the cluster at risk."""

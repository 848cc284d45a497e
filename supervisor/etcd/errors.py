"""Typed errors for what etcd (or the way to it) answers.

etcd reports its errors as a gRPC status code plus a fixed message string
(``etcdserver: ...``); the message is the stable part of that contract, so errors are
recognised by message first and by status code as a fallback.
"""

from __future__ import annotations

import enum

__all__ = [
    "AuthError",
    "AuthNotEnabled",
    "AuthenticationFailed",
    "BadLeaderTransferee",
    "Compacted",
    "Corrupt",
    "EtcdConnectionError",
    "EtcdError",
    "EtcdTimeout",
    "EtcdTlsError",
    "EtcdUnavailable",
    "FutureRevision",
    "GrpcStatus",
    "InvalidAuthToken",
    "InvalidRequest",
    "KeyNotFound",
    "LeaderChanged",
    "LearnerNotReady",
    "LeaseExists",
    "LeaseNotFound",
    "MemberExists",
    "MemberNotFound",
    "MemberNotLearner",
    "MembershipError",
    "NoLeader",
    "NoSpace",
    "NotAuthenticated",
    "NotEnoughStartedMembers",
    "NotLeader",
    "NotSupportedForLearner",
    "PeerUrlExists",
    "PermissionDenied",
    "ProposalDropped",
    "RequestTimedOut",
    "RequestTooLarge",
    "RoleExists",
    "RoleNotFound",
    "RoleNotGranted",
    "RootUserMissing",
    "ServerStopped",
    "SnapshotIntegrityError",
    "TooManyLearners",
    "TooManyRequests",
    "UnhealthyCluster",
    "Unimplemented",
    "UserExists",
    "UserNotFound",
    "error_from_status",
]


class GrpcStatus(enum.IntEnum):
    """The gRPC status codes (the numbers are part of the gRPC protocol)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class EtcdError(Exception):
    """Anything that went wrong talking to etcd."""

    def __init__(
        self, message: str, *, status: GrpcStatus | None = None, endpoint: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.endpoint = endpoint

    def __str__(self) -> str:
        where = f" [{self.endpoint}]" if self.endpoint else ""
        return f"{self.message}{where}"


# --- the cluster can't answer right now: another endpoint or a retry may help


class EtcdUnavailable(EtcdError):
    """The endpoint is unreachable or the member cannot serve the request now."""


class EtcdConnectionError(EtcdUnavailable):
    """No connection to the endpoint (refused, reset, DNS...)."""


class EtcdTlsError(EtcdConnectionError):
    """The TLS handshake failed: untrusted certificate, or the server demanded a client certificate."""


class EtcdTimeout(EtcdUnavailable):
    """The call's deadline passed before etcd answered."""


class NoLeader(EtcdUnavailable):
    """The member has no leader (election in progress or lost quorum)."""


class LeaderChanged(EtcdUnavailable):
    """The leader changed while the request was in flight; its outcome is unknown."""


class ProposalDropped(EtcdUnavailable):
    """The leader refused to take the change, as raft does while it hands leadership over: it
    never entered the log, so nothing was applied and sending it again is safe."""


class RequestTimedOut(EtcdUnavailable):
    """etcd gave up waiting for the request to commit; its outcome is unknown."""


class UnhealthyCluster(EtcdUnavailable):
    """etcd refused a membership change that would leave the cluster without quorum."""


class NotSupportedForLearner(EtcdUnavailable):
    """The endpoint is a learner, which serves no such request."""


class ServerStopped(EtcdUnavailable):
    """The member is shutting down."""


# --- the request cannot succeed as asked


class NoSpace(EtcdError):
    """The NOSPACE alarm is raised: the backend quota is exhausted; only reads and deletes work."""


class Corrupt(EtcdError):
    """The CORRUPT alarm is raised."""


class Compacted(EtcdError):
    """The requested revision has been compacted away."""


class FutureRevision(EtcdError):
    """The requested revision is newer than the store."""


class LeaseNotFound(EtcdError):
    pass


class LeaseExists(EtcdError):
    """A lease with the ID asked for is granted already."""


class KeyNotFound(EtcdError):
    pass


class RequestTooLarge(EtcdError):
    pass


class TooManyRequests(EtcdError):
    pass


class InvalidRequest(EtcdError):
    """etcd rejected the request's arguments."""


class Unimplemented(EtcdError):
    """The member does not know the call: an older etcd (3.4 has no AuthStatus)."""


class NotLeader(EtcdError):
    """The request must be sent to the leader (MoveLeader)."""


class BadLeaderTransferee(EtcdError):
    """MoveLeader's target cannot take the leadership (a learner, unknown, or the leader itself)."""


# --- membership


class MembershipError(EtcdError):
    """A membership change was refused."""


class MemberNotFound(MembershipError):
    pass


class MemberExists(MembershipError):
    pass


class PeerUrlExists(MembershipError):
    pass


class NotEnoughStartedMembers(MembershipError):
    """Removing or adding now would leave too few started members for quorum."""


class MemberNotLearner(MembershipError):
    """Only a learner can be promoted."""


class LearnerNotReady(MembershipError):
    """The learner has not caught up with the leader's log yet; promote again later."""


class TooManyLearners(MembershipError):
    pass


# --- authentication and authorisation


class AuthError(EtcdError):
    pass


class PermissionDenied(AuthError):
    pass


class AuthenticationFailed(AuthError):
    """Wrong user name or password."""


class InvalidAuthToken(AuthError):
    """The token expired or the member that issued it restarted."""


class NotAuthenticated(AuthError):
    """Auth is enabled and the request carried no credentials."""


class AuthNotEnabled(AuthError):
    pass


class UserExists(AuthError):
    pass


class UserNotFound(AuthError):
    pass


class RoleExists(AuthError):
    pass


class RoleNotFound(AuthError):
    pass


class RootUserMissing(AuthError):
    """Auth cannot be enabled before a root user with the root role exists."""


class RoleNotGranted(AuthError):
    pass


class SnapshotIntegrityError(EtcdError):
    """The snapshot stream ended early or its trailing sha256 does not match its content."""


# etcd's own message strings (api/v3rpc/rpctypes), the stable half of its error contract.
_BY_MESSAGE: dict[str, type[EtcdError]] = {
    "etcdserver: mvcc: database space exceeded": NoSpace,
    "etcdserver: corrupt cluster": Corrupt,
    "etcdserver: mvcc: required revision has been compacted": Compacted,
    "etcdserver: mvcc: required revision is a future revision": FutureRevision,
    "etcdserver: requested lease not found": LeaseNotFound,
    "etcdserver: lease already exists": LeaseExists,
    "etcdserver: key not found": KeyNotFound,
    "etcdserver: request is too large": RequestTooLarge,
    "etcdserver: too many requests": TooManyRequests,
    "etcdserver: member ID already exist": MemberExists,
    "etcdserver: Peer URLs already exists": PeerUrlExists,
    "etcdserver: re-configuration failed due to not enough started members": NotEnoughStartedMembers,
    "etcdserver: member not found": MemberNotFound,
    "etcdserver: can only promote a learner member": MemberNotLearner,
    "etcdserver: can only promote a learner member which is in sync with leader": LearnerNotReady,
    "etcdserver: too many learner members in cluster": TooManyLearners,
    "etcdserver: no leader": NoLeader,
    "etcdserver: not leader": NotLeader,
    "etcdserver: leader changed": LeaderChanged,
    "etcdserver: server stopped": ServerStopped,
    # raft's own error, passed through unprefixed (gRPC status UNKNOWN).
    "raft proposal dropped": ProposalDropped,
    "etcdserver: request timed out": RequestTimedOut,
    "etcdserver: request timed out, possibly due to previous leader failure": RequestTimedOut,
    "etcdserver: request timed out, possibly due to connection lost": RequestTimedOut,
    "etcdserver: unhealthy cluster": UnhealthyCluster,
    "etcdserver: rpc not supported for learner": NotSupportedForLearner,
    "etcdserver: bad leader transferee": BadLeaderTransferee,
    "etcdserver: permission denied": PermissionDenied,
    "etcdserver: authentication failed, invalid user ID or password": AuthenticationFailed,
    # A password given for a user made without one (a certificate-only user): auth's own error,
    # passed through unprefixed (gRPC status UNKNOWN).
    "auth: authentication failed, password was given for no password user": AuthenticationFailed,
    "etcdserver: invalid auth token": InvalidAuthToken,
    # What etcd answers a request without a token once auth is on.
    "etcdserver: user name is empty": NotAuthenticated,
    "etcdserver: authentication is not enabled": AuthNotEnabled,
    "etcdserver: user name already exists": UserExists,
    "etcdserver: user name not found": UserNotFound,
    "etcdserver: role name already exists": RoleExists,
    "etcdserver: role name not found": RoleNotFound,
    "etcdserver: root user does not exist": RootUserMissing,
    "etcdserver: root user does not have root role": RootUserMissing,
    "etcdserver: role is not granted to the user": RoleNotGranted,
}

_BY_STATUS: dict[GrpcStatus, type[EtcdError]] = {
    GrpcStatus.UNAVAILABLE: EtcdUnavailable,
    GrpcStatus.DEADLINE_EXCEEDED: EtcdTimeout,
    GrpcStatus.PERMISSION_DENIED: PermissionDenied,
    GrpcStatus.UNAUTHENTICATED: InvalidAuthToken,
    GrpcStatus.RESOURCE_EXHAUSTED: TooManyRequests,
    GrpcStatus.INVALID_ARGUMENT: InvalidRequest,
    GrpcStatus.OUT_OF_RANGE: InvalidRequest,
    GrpcStatus.UNIMPLEMENTED: Unimplemented,
}


def error_from_status(status: int, message: str | None, *, endpoint: str | None = None) -> EtcdError:
    """The typed error for a gRPC status etcd returned."""
    text = (message or "").strip()
    try:
        code: GrpcStatus | None = GrpcStatus(status)
    except ValueError:
        code = None
    cls = _BY_MESSAGE.get(text)
    if cls is None and code is not None:
        cls = _BY_STATUS.get(code)
    return (cls or EtcdError)(text or f"gRPC status {status}", status=code, endpoint=endpoint)

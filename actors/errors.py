"""Errors the actors tell apart. The etcd adapter maps etcd's own errors onto these."""


class EtcdError(Exception):
    """Any failed etcd operation."""


class EtcdUnavailable(EtcdError):
    """No endpoint answered in time."""


class AuthRefused(EtcdError):
    """etcd refused the call for want of credentials or permission: its auth is on, and the
    supervisor is not a user who may make the call."""


class RevisionCompacted(EtcdError):
    """The revision asked about is compacted away."""


class LearnerNotReady(EtcdError):
    """etcd refused a promotion: the learner's log is not yet in sync with the leader's."""


class MemberNotFound(EtcdError):
    """The member is not (or no longer) in etcd's membership."""


class ClusterUnhealthy(EtcdError):
    """etcd refused a membership change that would put the cluster at risk."""


class StoreError(Exception):
    """Any failed object-store operation; the message names the store and what failed."""


class StoreNotFound(StoreError):
    """The bucket (or directory) or the key does not exist."""


class StoreAccessDenied(StoreError):
    """The store refused the credentials, or there are none to be had."""


class StoreUnavailable(StoreError):
    """The endpoint did not answer (refused, unreachable, timed out, or failing with 5xx)."""


class StoreFull(StoreError):
    """No space left: a full local disk (ENOSPC, EDQUOT) or a store's quota."""


class BackupEncodingError(StoreError):
    """A backup object cannot be encrypted, or decrypted and decompressed. Its class name is the
    reason the BackupHealthy condition shows, and the message starts with it, so a restore's or
    a verification's error names it too. Retrying does not help: a person must act (README,
    runbook "backup cannot be decrypted")."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{type(self).__name__}: {message}")

    @property
    def reason(self) -> str:
        return type(self).__name__


class BackupKeyMissing(BackupEncodingError):
    """The key Secret (locally: the key file) is absent or has no `key` to encrypt with, or an
    object's key id is among none of its keys."""


class BackupCorrupt(BackupEncodingError):
    """An unencrypted (compressed) backup object is not well formed: truncated or corrupt."""


class BackupKeyInvalid(BackupEncodingError):
    """A key in the Secret or file is not the base64 of 32 bytes."""


class BackupDecryptFailed(BackupEncodingError):
    """An object does not authenticate under the key its id names, or is not a well-formed
    backup object: corrupt, truncated, reordered or tampered with. Nothing of it is used."""


class StepFailed(Exception):
    """A step the cluster actor took failed for a reason that is not etcd's (a restore whose
    backup is missing or corrupt, say): held off and retried like a refused step."""


class RuntimeRefused(StepFailed):
    """The member runtime refused a change: on Kubernetes the API server answered no (a quota,
    an admission webhook, a volume still being deleted, RBAC). Held off and retried with a
    warning Event, so the cluster actor keeps what it observed; but see NamespaceTerminating."""


class NamespaceTerminating(RuntimeRefused):
    """The cluster's namespace is being deleted: the API server takes nothing new in it (no pod,
    no Event) until it is gone, and a namespace never stops terminating. The cluster actor
    stops taking steps and says why, instead of retrying and warning until it is deleted."""


class RestoreFailed(StepFailed):
    """The backup to restore a new cluster from is missing, unreadable or corrupt."""


class CertificatesRefused(Exception):
    """A certificate store could not read or renew a cluster's certificates (a file not
    writable, a Secret update refused). The renewal child reports it and tries again."""

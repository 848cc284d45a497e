"""The etcd adapter: an admin client over grpclib and the generated stubs in ``proto.etcd``."""

from . import errors
from .client import EtcdClient, open_etcd_client
from .errors import *  # noqa: F403 (the typed errors are part of the surface)
from .records import (
    Alarm,
    AlarmKind,
    EndpointStatus,
    HashKV,
    KeyValue,
    Member,
    PermissionKind,
    SnapshotResult,
    TxnOpResult,
    TxnResult,
)
from .tls import TlsFiles
from .txn import Compare, CompareTarget, Delete, Get, Put, TxnOp

__all__ = [
    "Alarm",
    "AlarmKind",
    "Compare",
    "CompareTarget",
    "Delete",
    "EndpointStatus",
    "EtcdClient",
    "Get",
    "HashKV",
    "KeyValue",
    "Member",
    "PermissionKind",
    "Put",
    "SnapshotResult",
    "TlsFiles",
    "TxnOp",
    "TxnOpResult",
    "TxnResult",
    "open_etcd_client",
    *errors.__all__,
]

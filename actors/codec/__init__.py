"""EtcdCluster and EtcdBackup documents <-> domain records.

The daemon's own reading of a resource: the CRD schema rejects what it can at `kubectl apply`,
and this applies the same rules to what reaches the daemon another way (a local YAML file, an
object stored before the CRD was tightened). Every rule broken is reported with the field's
path and the rule, never just the first one, and nothing is silently changed.

The parts: fields.py (rules, errors, the Reader), spec.py (a cluster's spec), stores.py (where
backups go), documents.py (whole objects and YAML files), status.py (status objects). This
module only gathers what callers import.
"""

from actors.codec.documents import (
    InvalidBackup,
    parse_cluster,
    parse_cluster_documents,
    parse_documents,
    parse_etcd_backup,
)
from actors.codec.fields import (
    NAME_PATTERN,
    REPOSITORY_PATTERN,
    VERSION_PATTERN,
    DocumentError,
    InvalidCluster,
    InvalidDocument,
    Reader,
    SpecError,
)
from actors.codec.spec import parse_spec
from actors.codec.status import (
    backup_status_from_dict,
    backup_status_to_dict,
    conditions_from_dicts,
    status_to_dict,
)
from actors.codec.stores import parse_store

__all__ = [
    "NAME_PATTERN",
    "REPOSITORY_PATTERN",
    "VERSION_PATTERN",
    "DocumentError",
    "InvalidBackup",
    "InvalidCluster",
    "InvalidDocument",
    "Reader",
    "SpecError",
    "backup_status_from_dict",
    "backup_status_to_dict",
    "conditions_from_dicts",
    "parse_cluster",
    "parse_cluster_documents",
    "parse_documents",
    "parse_etcd_backup",
    "parse_spec",
    "parse_store",
    "status_to_dict",
]

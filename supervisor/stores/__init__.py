"""Object stores behind actors.store_port.ObjectStore: a local directory, S3-compatible, GCS.

`open_store(spec, credentials=...)` builds one from a StoreSpec; `local_credentials` finds the
credentials of local mode (on Kubernetes: supervisor.kube.store_credentials).
"""

from supervisor.stores.credentials import local_credentials
from supervisor.stores.factory import StoreOptions, open_store

__all__ = ["StoreOptions", "local_credentials", "open_store"]

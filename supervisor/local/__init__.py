"""The local runtime: each etcd member is a process on 127.0.0.1, its data under a state directory.

This is the product's embedded default (`etcd-supervisor local FILE`): no Kubernetes, same actors.
"""

from supervisor.local.runtime import LocalRuntime, open_local_runtime

__all__ = ["LocalRuntime", "open_local_runtime"]

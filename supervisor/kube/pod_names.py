"""Names of an adopted cluster's members resolved as a pod in the EtcdCluster's namespace would.

A user writes spec.adopt.endpoints as the old cluster's clients do, often short
(`http://old-0.old:2379`: pod old-0 of the headless Service old, in the same namespace), and
an old member may advertise such names too. A pod resolves them through its search path
(`<ns>.svc.<domain> svc.<domain> <domain>`, ndots 5), so the new member pods find the old members;
the operator runs elsewhere (its own namespace, or outside the cluster), where the same name
means another thing or nothing. So each cluster's admin qualifies the short names in the URLs it
dials with the first name of that search path that resolves, as a pod of the cluster's namespace
would: `http://old-0.old.shop.svc.cluster.local:2379`. Per cluster, not in the process's address
book (supervisor/etcd/addresses.py): the same short name means another pod in another namespace
(two Bitnami clusters adopted at once both call theirs `etcd-0.etcd-headless`). A name no
candidate resolves is dialled as written.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

import trio

NDOTS = 5  # the kubelet's resolv.conf for pods: fewer dots than this, the search path first
# A short name is looked up again this often at most: what resolves can change (a pod gone).
FRESH_FOR = 10.0


def search_names(host: str, namespace: str, cluster_domain: str) -> list[str]:
    """The fully qualified names a pod in `namespace` tries for `host` before `host` itself;
    none for an address, an absolute name, or one with NDOTS dots (tried as it is first)."""
    if not host or host.endswith(".") or host.count(".") >= NDOTS or _is_address(host):
        return []
    if host.endswith(f".{cluster_domain}"):
        return []  # qualified already (our members' names among them, whose addresses the runtime keeps)
    return [
        f"{host}.{namespace}.svc.{cluster_domain}",
        f"{host}.svc.{cluster_domain}",
        f"{host}.{cluster_domain}",
    ]


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _resolves(name: str) -> bool:
    try:
        return bool(socket.getaddrinfo(name, None, type=socket.SOCK_STREAM))
    except (OSError, UnicodeError):
        return False


class PodNames:
    """Qualifies the short host names of one cluster's old members (see the module)."""

    def __init__(self, namespace: str, cluster_domain: str) -> None:
        self._namespace = namespace
        self._domain = cluster_domain
        # host -> (trio.current_time() of its lookup, the name to dial for it)
        self._names: dict[str, tuple[float, str]] = {}

    async def qualified(self, urls: Iterable[str]) -> list[str]:
        """`urls` with each short host replaced by its qualified name (looked up in a worker
        thread, getaddrinfo blocks; again after FRESH_FOR, an old member's pod may be gone)."""
        urls = list(urls)
        now = trio.current_time()
        due = set()
        for url in urls:
            host = urlsplit(url).hostname or ""
            looked = self._names.get(host)
            if search_names(host, self._namespace, self._domain) and (
                looked is None or now - looked[0] >= FRESH_FOR
            ):
                due.add(host)
        if due:
            found = await trio.to_thread.run_sync(self._look_up, sorted(due))
            self._names.update({host: (now, name) for host, name in found.items()})
        return [self._rewrite(url) for url in urls]

    def _look_up(self, hosts: list[str]) -> dict[str, str]:
        return {host: self._first_resolving(host) for host in hosts}

    def _first_resolving(self, host: str) -> str:
        candidates = search_names(host, self._namespace, self._domain)
        return next((name for name in candidates if _resolves(name)), host)

    def _rewrite(self, url: str) -> str:
        looked = self._names.get(urlsplit(url).hostname or "")
        return url if looked is None else with_host(url, looked[1])


def with_host(url: str, host: str) -> str:
    """`url` with its host name replaced by `host` (its scheme, port and the rest kept)."""
    parts = urlsplit(url)
    if parts.hostname == host:
        return url
    return urlunsplit(parts._replace(netloc=host if parts.port is None else f"{host}:{parts.port}"))

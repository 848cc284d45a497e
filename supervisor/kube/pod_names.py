"""Names of an adopted cluster's members resolved as a pod in the EtcdCluster's namespace would.

A user writes spec.adopt.endpoints as the old cluster's clients do, often short
(`http://old-0.old:2379`: pod old-0 of the headless Service old, in the same namespace), and
an old member may advertise such names too. A pod resolves them through its search path
(`<ns>.svc.<domain> svc.<domain> <domain>`, ndots 5), so the new member pods find the old members;
the operator runs elsewhere (its own namespace, or outside the cluster), where the same name
means another thing or nothing. So before each look at the old members the operator resolves
their short names itself, in the order a pod in the cluster's namespace tries them, and records
the address (supervisor/etcd/addresses.py): connections go there, a TLS name still checked
against the name as written. A name no candidate resolves is left to the usual resolution.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

import trio

from supervisor.etcd.addresses import KNOWN

NDOTS = 5  # the kubelet's resolv.conf for pods: fewer dots than this, the search path first
# A name is resolved again this often at most: an old member's pod can come back elsewhere.
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


def _resolve(name: str) -> str | None:
    try:
        found = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    return str(found[0][4][0]) if found else None


class PodNames:
    """Records addresses for the short names of one cluster's old members (see the module)."""

    def __init__(self, namespace: str, cluster_domain: str) -> None:
        self._namespace = namespace
        self._domain = cluster_domain
        self._looked_at: dict[str, float] = {}  # host -> trio.current_time() of its last lookup

    async def note(self, urls: Iterable[str]) -> None:
        """Resolve the short host names in `urls` (in a worker thread: getaddrinfo blocks)."""
        now = trio.current_time()
        due = []
        for url in urls:
            host = urlsplit(url).hostname or ""
            fresh = now - self._looked_at.get(host, -FRESH_FOR) < FRESH_FOR
            if search_names(host, self._namespace, self._domain) and not fresh:
                self._looked_at[host] = now
                due.append(host)
        if due:
            await trio.to_thread.run_sync(self._note_now, due)

    def _note_now(self, hosts: list[str]) -> None:
        for host in hosts:
            found = (_resolve(n) for n in search_names(host, self._namespace, self._domain))
            address = next((a for a in found if a), None)
            if address is None:
                KNOWN.forget(host)  # not a name of the cluster's: resolved as usual
            else:
                KNOWN.remember(host, address)

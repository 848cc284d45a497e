"""Addresses the runtime already knows for members' host names: connections need no DNS.

On Kubernetes a member's URLs name it by its stable DNS name
(`<member>.<cluster>-peer.<ns>.svc.<domain>`), whose record exists only once the endpoints
controller has seen the pod's address. A lookup made a moment earlier is answered NXDOMAIN,
and a DNS that caches denials (NodeLocal DNSCache keeps them 5 s) goes on answering that: each
step of a bootstrap waited it out, 15.6 s to form three members instead of 3.6 s (issue 28).
The Kubernetes runtime learns each member pod's address from the API server as soon as the
kubelet reports it and records it here; a connection to that host goes to the address, its
certificate still checked against the name. A member whose pod has no address (not started yet,
or gone) is recorded as UNADDRESSED: a connection to it fails at once instead of asking DNS, whose
denial, cached, would then be what etcd's own peers get for that name once the pod is back. A
host not recorded at all is resolved as usual.

One book per process: a host name means the same pod to every client in it.
"""

from __future__ import annotations

import threading

# Recorded for a member known to have no address now: dial nothing, resolve nothing.
UNADDRESSED = ""


class AddressBook:
    """Host name -> the address to dial instead of resolving it. Thread-safe: clients run in
    worker threads too (the cluster version probe)."""

    def __init__(self) -> None:
        self._by_host: dict[str, str] = {}
        self._lock = threading.Lock()

    def remember(self, host: str, address: str) -> None:
        with self._lock:
            self._by_host[host] = address

    def forget(self, host: str) -> None:
        with self._lock:
            self._by_host.pop(host, None)

    def lookup(self, host: str) -> str | None:
        """The address to dial, UNADDRESSED, or None for a host the runtime does not know."""
        with self._lock:
            return self._by_host.get(host)


KNOWN = AddressBook()

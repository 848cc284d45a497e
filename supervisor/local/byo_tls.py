"""Certificates the user brings (spec.security.tls.secretRef) in the local runtime.

Locally a Secret is a directory next to the manifest (as spec.adopt's and spec.security.auth's
are): `secretRef: {name: my-tls}` names <manifest dir>/my-tls/ holding the files
supervisor/brought_tls.py names. Checked with the same rules as on Kubernetes, plus one of the
local runtime's own (members listen on 127.0.0.1: server.crt and peer.crt must name it), then
copied into the cluster's tls/ directory under the same names: members and the supervisor's
client read the copy, so a broken edit of the user's directory never reaches them, and a copy
that changed carries a new trust digest (brought_tls.trust), which rolls the members one at a
time. The cluster's tls/ directory holds no CA key then: that is how a brought copy is told from
generated material.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Mapping
from pathlib import Path

from cryptography import x509

from actors.errors import CertificatesRefused
from supervisor import brought_tls, ca_material
from supervisor.etcd.tls import TlsFiles
from supervisor.local.layout import write_file_atomically

# Members listen, and are dialled, on this address (supervisor/local/runtime.py).
LOOPBACK = ipaddress.ip_address("127.0.0.1")
# Written in this order: the bundle first (a new CA is trusted before a leaf it signed is
# served), each key before its certificate.
WRITE_ORDER = (
    brought_tls.CA_CERT,
    brought_tls.SERVER_KEY,
    brought_tls.SERVER_CERT,
    brought_tls.PEER_KEY,
    brought_tls.PEER_CERT,
    brought_tls.CLIENT_KEY,
    brought_tls.CLIENT_CERT,
)
# What generated material has and a copy must not (supervisor/local/tls.py's CA files).
GENERATED = (ca_material.CA_KEY, ca_material.NEXT_CERT, ca_material.NEXT_KEY)
KEYS = {brought_tls.SERVER_KEY, brought_tls.PEER_KEY, brought_tls.CLIENT_KEY}


def is_brought(tls_dir: Path) -> bool:
    """Whether a cluster's tls/ directory holds a copy of the user's material."""
    return (tls_dir / brought_tls.PEER_CERT).exists() and not (tls_dir / ca_material.CA_KEY).exists()


def read(directory: Path) -> dict[str, bytes]:
    """The files brought_tls names that `directory` holds."""
    return {
        name: (directory / name).read_bytes() for name in brought_tls.NAMES if (directory / name).is_file()
    }


def files(tls_dir: Path, pair: tuple[str, str]) -> TlsFiles:
    """One of brought_tls.PAIRS in the copy, with the copy's CA bundle."""
    cert, key = pair
    return TlsFiles(tls_dir / brought_tls.CA_CERT, tls_dir / cert, tls_dir / key)


def problems(pems: Mapping[str, bytes], *, now: dt.datetime) -> list[str]:
    """brought_tls.problems, then the local rule: the listeners' certificates name 127.0.0.1."""
    found = brought_tls.problems(pems, now=now)
    if found:
        return found
    return [
        f"{name} does not name {LOOPBACK} (an IP subjectAltName): local members listen there"
        for name in (brought_tls.SERVER_CERT, brought_tls.PEER_CERT)
        if LOOPBACK not in _ips(x509.load_pem_x509_certificate(pems[name]))
    ]


def sync_copy(source: Path, tls_dir: Path, *, now: dt.datetime) -> bool:
    """Copy the user's directory `source` into `tls_dir` when it changed; whether it did.
    CertificatesRefused naming the directory, the file and the rule when it is missing or not
    usable: nothing is copied then, and members keep what they run on."""
    if not source.is_dir():
        raise CertificatesRefused(f"secretRef: {source} is not a directory")
    try:
        pems = read(source)
    except OSError as e:
        raise CertificatesRefused(f"secretRef: {source} not read: {e}") from e
    found = problems(pems, now=now)
    if found:
        raise CertificatesRefused(f"secretRef: {source}: {'; '.join(found)}")
    try:
        live = read(tls_dir) if tls_dir.is_dir() else {}
        if live == pems:
            return False
        tls_dir.mkdir(parents=True, exist_ok=True)
        for name in WRITE_ORDER:
            if live.get(name) != pems[name]:
                write_file_atomically(tls_dir / name, pems[name], mode=0o600 if name in KEYS else 0o644)
        # A CA made here before the first copy (a client asked for files while the user's
        # directory was still unusable) must not outlive it: without a CA key the copy is
        # recognised as brought (is_brought), and nothing signs with a CA the members don't trust.
        for name in GENERATED:
            (tls_dir / name).unlink(missing_ok=True)
    except OSError as e:
        raise CertificatesRefused(f"secretRef: the copy in {tls_dir} not written: {e}") from e
    return True


def _ips(cert: x509.Certificate) -> list[object]:
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return list(names.get_values_for_type(x509.IPAddress))

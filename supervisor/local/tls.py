"""Certificates for TLS clusters: one CA per cluster, a server/peer cert per member, a client cert.

Generated on first use and kept under the cluster's directory, so a restarted daemon (and the
etcd members it restarts) keep trusting each other. Leaves live as long as the spec's
`certificates.validity`; `LocalCertificates` (the CertificateStore the renewal child uses)
re-signs them in place before they expire. The CA is not rotated.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from pathlib import Path

import trio
from cryptography import x509

from actors.certificates import Certificate, CertificateState
from actors.errors import CertificatesRefused
from actors.model import CertificatesSpec, ClusterRef
from supervisor import pki
from supervisor.etcd.tls import TlsFiles
from supervisor.local.layout import ClusterLayout, StateLayout

CLIENT = "client"  # the daemon's own client identity, in the cluster's tls/ directory
MEMBER_STEM = "member"  # each member's server/peer pair, in its own tls/ directory


def ensure_ca(tls_dir: Path, *, common_name: str, certificates: CertificatesSpec) -> TlsFiles:
    """The cluster's CA (cert is also the trust bundle), created on first use."""
    ca = TlsFiles(tls_dir / "ca.crt", tls_dir / "ca.crt", tls_dir / "ca.key")
    if all(path.exists() for path in ca.pair()):
        return ca
    lifetime = datetime.timedelta(seconds=certificates.ca_validity_seconds)
    _write_pair(ca, pki.new_ca(common_name, now=_now(), lifetime=lifetime))
    return ca


def ensure_leaf(
    ca: TlsFiles,
    directory: Path,
    *,
    stem: str,
    common_name: str,
    server: bool,
    certificates: CertificatesSpec,
) -> TlsFiles:
    """A cert signed by the CA, valid for the spec's validity. Member certs serve both roles:
    etcd presents them to clients and, as a client, to its peers, so they carry serverAuth and
    clientAuth. An existing pair is kept as it is: renewing is LocalCertificates'."""
    files = TlsFiles(ca.ca_file, directory / f"{stem}.crt", directory / f"{stem}.key")
    if all(path.exists() for path in files.pair()):
        return files
    # Members listen on loopback only in the local runtime.
    leaf = pki.issue(
        _issuer(ca),
        common_name,
        now=_now(),
        lifetime=datetime.timedelta(seconds=certificates.validity_seconds),
        dns=["localhost"] if server else [],
        ips=["127.0.0.1"] if server else [],
        server_auth=server,
        client_auth=True,
    )
    _write_pair(files, leaf)
    return files


class LocalCertificates:
    """The CertificateStore of the local runtime: the files under each cluster's directory.

    Leaves are named `client` (the daemon's own) and by member. A renewal re-signs the
    certificate with its key kept (pki.reissue) and replaces the one file by a rename, so etcd,
    which reads its pair from disk at every handshake, sees the old or the new certificate
    whole, each matching the key, and `local env`'s paths stay the same.
    """

    def __init__(self, state_dir: Path) -> None:
        self._layout = StateLayout(state_dir)

    async def read(self, cluster: ClusterRef) -> CertificateState | None:
        return await trio.to_thread.run_sync(self._read, self._layout.cluster(cluster))

    async def renew(self, cluster: ClusterRef, names: Sequence[str], lifetime: float) -> None:
        await trio.to_thread.run_sync(self._renew, self._layout.cluster(cluster), tuple(names), lifetime)

    def _read(self, layout: ClusterLayout) -> CertificateState | None:
        ca_file = layout.tls_dir / "ca.crt"
        if not ca_file.exists():
            return None
        try:
            ca = _certificate("ca", ca_file)
            leaves = [_certificate(name, path) for name, path in _leaves(layout).items()]
        except (OSError, ValueError) as e:
            raise CertificatesRefused(f"cannot read the certificates of {layout.root}: {e}") from e
        return CertificateState(ca, tuple(leaves))

    def _renew(self, layout: ClusterLayout, names: tuple[str, ...], lifetime: float) -> None:
        paths = _leaves(layout)
        try:
            issuer = _issuer(TlsFiles(None, layout.tls_dir / "ca.crt", layout.tls_dir / "ca.key"))
            for name in names:
                path = paths[name]
                leaf = x509.load_pem_x509_certificate(path.read_bytes())
                renewed = pki.reissue(issuer, leaf, now=_now(), lifetime=datetime.timedelta(seconds=lifetime))
                _write_file(path, pki.KeyPair(renewed, issuer.key).cert_pem(), mode=0o644)
        except (OSError, ValueError, KeyError) as e:
            raise CertificatesRefused(f"cannot renew {', '.join(names)}: {e}") from e


def _leaves(layout: ClusterLayout) -> dict[str, Path]:
    """Leaf name -> its certificate file, for the pairs that exist."""
    found = {}
    if (layout.tls_dir / f"{CLIENT}.crt").exists():
        found[CLIENT] = layout.tls_dir / f"{CLIENT}.crt"
    if layout.members_dir.is_dir():
        for member in sorted(layout.members_dir.iterdir()):
            cert = layout.member(member.name).tls_dir / f"{MEMBER_STEM}.crt"
            if cert.exists():
                found[member.name] = cert
    return found


def _certificate(name: str, path: Path) -> Certificate:
    return Certificate(name, *pki.dates(x509.load_pem_x509_certificate(path.read_bytes())))


def _issuer(ca: TlsFiles) -> pki.KeyPair:
    ca_cert, ca_key = ca.pair()
    return pki.KeyPair.from_pem(ca_cert.read_bytes(), ca_key.read_bytes())


def _write_pair(files: TlsFiles, pair: pki.KeyPair) -> None:
    cert, key = files.pair()
    cert.parent.mkdir(parents=True, exist_ok=True)
    # Key first, and only readable by us; the cert's presence is what marks the pair complete.
    _write_file(key, pair.key_pem(), mode=0o600)
    _write_file(cert, pair.cert_pem(), mode=0o644)


def _write_file(path: Path, content: bytes, *, mode: int) -> None:
    # Written aside, then renamed over: a reader opens the old file or the new one, never half.
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(content)
    os.replace(tmp, path)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)

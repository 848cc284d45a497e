"""Certificates for TLS clusters: one CA per cluster, a server/peer cert per member, a client cert.

Generated once and kept under the cluster's directory, so a restarted daemon (and the etcd
members it restarts) keep trusting each other. Rotation is not done here yet; leaf certificates
are valid for LEAF_LIFETIME.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from supervisor import pki
from supervisor.etcd.tls import TlsFiles

CA_LIFETIME = datetime.timedelta(days=3650)
LEAF_LIFETIME = datetime.timedelta(days=825)


def ensure_ca(tls_dir: Path, *, common_name: str) -> TlsFiles:
    """The cluster's CA (cert is also the trust bundle), created on first use."""
    ca = TlsFiles(tls_dir / "ca.crt", tls_dir / "ca.crt", tls_dir / "ca.key")
    if all(path.exists() for path in ca.pair()):
        return ca
    _write_pair(ca, pki.new_ca(common_name, now=_now(), lifetime=CA_LIFETIME))
    return ca


def ensure_leaf(ca: TlsFiles, directory: Path, *, stem: str, common_name: str, server: bool) -> TlsFiles:
    """A cert signed by the CA. Member certs serve both roles: etcd presents them to clients and,
    as a client, to its peers, so they carry serverAuth and clientAuth."""
    files = TlsFiles(ca.ca_file, directory / f"{stem}.crt", directory / f"{stem}.key")
    if all(path.exists() for path in files.pair()):
        return files
    ca_cert, ca_key = ca.pair()
    issuer = pki.KeyPair.from_pem(ca_cert.read_bytes(), ca_key.read_bytes())
    # Members listen on loopback only in the local runtime.
    leaf = pki.issue(
        issuer,
        common_name,
        now=_now(),
        lifetime=LEAF_LIFETIME,
        dns=["localhost"] if server else [],
        ips=["127.0.0.1"] if server else [],
        server_auth=server,
        client_auth=True,
    )
    _write_pair(files, leaf)
    return files


def _write_pair(files: TlsFiles, pair: pki.KeyPair) -> None:
    cert, key = files.pair()
    cert.parent.mkdir(parents=True, exist_ok=True)
    # Key first, and only readable by us; the cert's presence is what marks the pair complete.
    _write_file(key, pair.key_pem(), mode=0o600)
    _write_file(cert, pair.cert_pem(), mode=0o644)


def _write_file(path: Path, content: bytes, *, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(content)
    os.replace(tmp, path)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)

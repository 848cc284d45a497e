"""What certificate a TLS listener presents on a new handshake: how the tests see that etcd
took a renewed certificate from disk without a restart."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
from pathlib import Path

from cryptography import x509


def served_not_after(host: str, port: int, ca: Path, cert: Path, key: Path) -> dt.datetime:
    """The notAfter of the certificate `host:port` presents to a client holding `cert` (blocking)."""
    return served_certificate(host, port, ca, cert, key).not_valid_after_utc


def served_certificate(host: str, port: int, ca: Path, cert: Path, key: Path) -> x509.Certificate:
    """The certificate `host:port` presents to a client holding `cert` (blocking)."""
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False  # the name is not the point here: the certificate's dates are
    context.load_cert_chain(str(cert), str(key))
    with (
        socket.create_connection((host, port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=host) as conn,
    ):
        der = conn.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)

"""TLS files: the CA that signs the servers, and an optional certificate with its key.

The one record of TLS material in the project: etcd clients take it (with `ssl_context`), and
the local runtime hands the same record's paths to etcd's own TLS flags.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import attrs


@attrs.frozen
class TlsFiles:
    ca_file: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    cert_file: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    key_file: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    server_name: str | None = None
    """Name to check the server certificate against instead of the endpoint's host."""

    def __attrs_post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together")

    def pair(self) -> tuple[Path, Path]:
        """The certificate and its key, for a holder that must have both (a server, a CA)."""
        if self.cert_file is None or self.key_file is None:
            raise ValueError("no certificate and key in these TLS files")
        return self.cert_file, self.key_file

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH, cafile=str(self.ca_file) if self.ca_file else None
        )
        if self.cert_file is not None and self.key_file is not None:
            context.load_cert_chain(str(self.cert_file), str(self.key_file))
        # gRPC servers speak HTTP/2 only and newer ones insist on ALPN saying so.
        context.set_alpn_protocols(["h2"])
        return context


class FollowingContext:
    """An SSL context that follows its files: a renewed client certificate (supervisor/local/tls.py,
    the Kubernetes Secret's copy in supervisor/kube/secret_tls.py) is loaded into the same
    context, and a CA added to the trust bundle (a CA rotation's first phase) is trusted too, so
    every connection made after it presents the new certificate and accepts the new CA.

    Renewal keeps the key, so the pair loaded is always whole. A CA dropped from the bundle stays
    trusted by this context (OpenSSL only adds): harmless, since nothing it signed is served any
    more. Connections already open keep what they presented at their handshake.
    """

    def __init__(self, tls: TlsFiles, alpn: str = "h2") -> None:
        self._tls = tls
        # Files not there yet (certificates the user brings, copied once their directory is
        # usable: supervisor/local/byo_tls.py) are loaded by current() when they appear; until
        # then the context trusts nothing and presents nothing, so no handshake succeeds.
        self._ca_stamp = _stat(tls.ca_file)
        self._pair_stamp = _stat(tls.cert_file) if _stat(tls.key_file) is not None else None
        if tls.ca_file is not None and self._ca_stamp is None:
            self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # not the system's CAs either
        else:
            self._context = attrs.evolve(tls, cert_file=None, key_file=None).ssl_context()
        if self._pair_stamp is not None and tls.cert_file is not None and tls.key_file is not None:
            self._context.load_cert_chain(str(tls.cert_file), str(tls.key_file))
        self._context.set_alpn_protocols([alpn])

    def current(self) -> ssl.SSLContext:
        ca_stamp = _stat(self._tls.ca_file)
        if ca_stamp != self._ca_stamp and self._tls.ca_file is not None and ca_stamp is not None:
            self._context.load_verify_locations(cafile=str(self._tls.ca_file))
            self._ca_stamp = ca_stamp
        stamp = _stat(self._tls.cert_file)
        if stamp != self._pair_stamp and self._tls.cert_file is not None and self._tls.key_file is not None:
            self._context.load_cert_chain(str(self._tls.cert_file), str(self._tls.key_file))
            self._pair_stamp = stamp
        return self._context


def _stat(path: Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None  # being replaced: keep what is loaded, look again next time
    return st.st_mtime_ns, st.st_ino

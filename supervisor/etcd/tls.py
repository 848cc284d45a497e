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
    """An SSL context whose client certificate follows its file: a renewed certificate
    (supervisor/local/tls.py, the Kubernetes Secret's copy in supervisor/kube/secret_tls.py) is
    loaded into the same context, so every connection made after it presents the new one.

    Renewal keeps the key, so the pair loaded is always whole. Connections already open keep
    what they presented at their handshake, which TLS does not check again.
    """

    def __init__(self, tls: TlsFiles, alpn: str = "h2") -> None:
        self._tls = tls
        self._context = tls.ssl_context()
        self._context.set_alpn_protocols([alpn])
        self._stamp = self._stat()

    def current(self) -> ssl.SSLContext:
        stamp = self._stat()
        if stamp != self._stamp and self._tls.cert_file is not None and self._tls.key_file is not None:
            self._context.load_cert_chain(str(self._tls.cert_file), str(self._tls.key_file))
            self._stamp = stamp
        return self._context

    def _stat(self) -> tuple[int, int] | None:
        if self._tls.cert_file is None:
            return None
        try:
            st = self._tls.cert_file.stat()
        except OSError:
            return None  # being replaced: keep what is loaded, look again next time
        return st.st_mtime_ns, st.st_ino

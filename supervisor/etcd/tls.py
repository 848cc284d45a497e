"""Client-side TLS: the CA that signs the servers, and an optional client certificate."""

from __future__ import annotations

import ssl
from pathlib import Path

import attrs


@attrs.frozen
class TlsConfig:
    ca_file: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    cert_file: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    key_file: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    server_name: str | None = None
    """Name to check the server certificate against instead of the endpoint's host."""

    def __attrs_post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together")

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(
            ssl.Purpose.SERVER_AUTH, cafile=str(self.ca_file) if self.ca_file else None
        )
        if self.cert_file is not None and self.key_file is not None:
            context.load_cert_chain(str(self.cert_file), str(self.key_file))
        # gRPC servers speak HTTP/2 only and newer ones insist on ALPN saying so.
        context.set_alpn_protocols(["h2"])
        return context

"""Certificates for a cluster: one CA, one member certificate, one client certificate.

The member certificate covers every member through wildcard SANs on the peer Service's
domain, so adding a member never needs a new certificate; it serves both the client and the
peer listener. The client certificate is the operator's own identity towards etcd. All of it
lands in the <cluster>-tls Secret (manifests.tls_secret). No I/O here: `now` comes in.
"""

from __future__ import annotations

import base64
import datetime as dt

from attrs import frozen

from actors.model import CertificatesSpec, ClusterRef
from supervisor import pki
from supervisor.kube import manifests


@frozen
class TlsMaterial:
    """PEM bytes, keyed as in the Secret."""

    files: dict[str, bytes]

    def secret_data(self) -> dict[str, str]:
        return {k: base64.b64encode(v).decode() for k, v in self.files.items()}


def member_dns_names(ref: ClusterRef, cluster_domain: str = manifests.DEFAULT_CLUSTER_DOMAIN) -> list[str]:
    return [
        *manifests.member_host_patterns(ref, cluster_domain),
        *manifests.client_service_hosts(ref, cluster_domain),
        "localhost",
    ]


def generate_cluster_tls(
    ref: ClusterRef,
    *,
    now: dt.datetime,
    cluster_domain: str = manifests.DEFAULT_CLUSTER_DOMAIN,
    certificates: CertificatesSpec | None = None,
    ca: pki.KeyPair | None = None,
) -> TlsMaterial:
    """A new CA and the certificates signed by it, for the lives `certificates` sets (the CA's
    caValidity, each leaf's validity; supervisor/kube/certificates.py renews the leaves).
    `ca`: sign with this CA instead of a new one (an adopted cluster's, supervisor/adopted_ca.py).

    The SANs follow cluster_domain once, at creation: the Secret is never regenerated while it
    exists (running members trust its CA), so the domain must not change over a cluster's life.
    """
    lives = certificates or CertificatesSpec()
    leaf_lifetime = dt.timedelta(seconds=lives.validity_seconds)
    ca_lifetime = dt.timedelta(seconds=lives.ca_validity_seconds)
    ca = ca or pki.new_ca(f"etcd-ca {ref.name}", now=now, lifetime=ca_lifetime, unit=ref.namespace)
    member = pki.issue(
        ca,
        f"etcd-member {ref.name}",
        now=now,
        lifetime=leaf_lifetime,
        dns=member_dns_names(ref, cluster_domain),
        ips=["127.0.0.1"],
        # Peers present the same certificate as clients of each other: both usages.
        server_auth=True,
        client_auth=True,
    )
    client = pki.issue(
        ca, "etcd-supervisor", now=now, lifetime=leaf_lifetime, server_auth=False, client_auth=True
    )
    return TlsMaterial(
        files={
            manifests.TLS_CA_CERT: ca.cert_pem(),
            manifests.TLS_CA_KEY: ca.key_pem(),
            manifests.TLS_CERT: member.cert_pem(),
            manifests.TLS_KEY: member.key_pem(),
            manifests.TLS_CLIENT_CERT: client.cert_pem(),
            manifests.TLS_CLIENT_KEY: client.key_pem(),
        }
    )

"""spec.adopt over TLS on Kubernetes: the cluster's <cluster>-tls Secret, signed by the old
cluster's peer CA (supervisor/adopted_ca.py), made before the first member: the operator reaches
the old members with its client certificate, and the new members' peer certificates must be
trusted by them. Made once; afterwards it is the cluster's Secret like any generated one."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Mapping

from actors.errors import EtcdUnavailable
from actors.model import ClusterResource
from supervisor.adopted_ca import AdoptionRefused, adopted_ca
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError, is_conflict
from supervisor.kube.tls import generate_cluster_tls


async def seed_adopted_tls(
    client: KubeClient, resource: ClusterResource, *, cluster_domain: str, now: Callable[[], dt.datetime]
) -> None:
    """Make the TLS Secret from the old cluster's CA, unless it exists. EtcdUnavailable, naming
    the Secret and the rule, when the user's Secrets cannot serve: nothing is made then, and the
    cluster waits for the old members as for any it cannot reach."""
    ref, spec = resource.ref, resource.spec
    adopt = spec.adopt
    if adopt is None:
        return
    try:
        ca = adopted_ca(
            await _secret_data(client, ref.namespace, adopt.peer_ca_secret),
            await _secret_data(client, ref.namespace, adopt.client_secret),
        )
        material = generate_cluster_tls(
            ref, now=now(), cluster_domain=cluster_domain, certificates=spec.certificates, ca=ca
        )
        secret = m.tls_secret(m.Owner(ref, resource.uid), material.secret_data())
        await client.create(m.core_path(ref.namespace, "secrets"), secret)
    except AdoptionRefused as e:
        raise EtcdUnavailable(f"cannot adopt over TLS: {e}") from e
    except KubeError as e:
        if not is_conflict(e):  # made meanwhile (another attempt): it is the one to use
            raise EtcdUnavailable(f"cannot adopt over TLS: {e}") from e


async def _secret_data(client: KubeClient, namespace: str, name: str | None) -> Mapping[str, bytes]:
    """A Secret's keys and decoded values; empty when it is not named or not there."""
    if name is None:
        return {}
    secret = await client.get_or_none(m.core_path(namespace, "secrets", name))
    data = (secret or {}).get("data") or {}
    return {key: base64.b64decode(value) for key, value in data.items()}

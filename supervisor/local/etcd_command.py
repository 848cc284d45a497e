"""The etcd command line for one local member."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from actors.model import MemberLaunch
from supervisor.etcd.member_settings import member_settings
from supervisor.etcd.tls import TlsFiles
from supervisor.local.layout import MemberLayout

# Loopback round trips are sub-millisecond, but this machine may be a loaded laptop or CI box:
# etcd's defaults (100 ms heartbeat, 1 s election) ride out scheduler stalls without elections.
LOCAL_FLAGS = (
    "--heartbeat-interval=100",
    "--election-timeout=1000",
    # A member rejoining after a restart must not disturb a healthy leader.
    "--pre-vote=true",
    "--auto-compaction-mode=periodic",
    "--auto-compaction-retention=1h",
    "--snapshot-count=10000",
    "--quota-backend-bytes=2147483648",
    "--logger=zap",
    "--log-outputs=stderr",
)


def cluster_token(launch: MemberLaunch) -> str:
    return f"{launch.cluster.namespace}-{launch.cluster.name}"


def etcd_argv(
    binary: Path,
    launch: MemberLaunch,
    member: MemberLayout,
    tls: TlsFiles | None,
    *,
    peer_tls: TlsFiles | None = None,
    metrics_port: int | None = None,
) -> list[str]:
    """metrics_port: etcd's /metrics and /health on plain HTTP there (loopback), even with TLS on.
    `tls` serves the client listener and, unless `peer_tls` is given (the user's peer pair,
    secretRef), the peer listener too: generated member certificates serve both roles."""
    _check_scheme(launch, tls is not None)
    peer, client = launch.urls.peer_url, launch.urls.client_url
    argv = [
        str(binary),
        f"--name={launch.name}",
        f"--data-dir={member.data_dir.resolve()}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--initial-cluster={launch.initial_cluster_flag()}",
        f"--initial-cluster-state={launch.initial_cluster_state}",
        f"--initial-cluster-token={cluster_token(launch)}",
        *_local_flags(launch),
    ]
    if launch.force_new_cluster:
        argv.append("--force-new-cluster=true")  # this start only: quorum-loss recovery
    if metrics_port is not None:
        argv.append(f"--listen-metrics-urls=http://127.0.0.1:{metrics_port}")
    if tls is not None:
        peer_tls = peer_tls or tls
        argv += [
            f"--cert-file={tls.cert_file}",
            f"--key-file={tls.key_file}",
            f"--trusted-ca-file={tls.ca_file}",
            "--client-cert-auth=true",
            f"--peer-cert-file={peer_tls.cert_file}",
            f"--peer-key-file={peer_tls.key_file}",
            f"--peer-trusted-ca-file={peer_tls.ca_file}",
            "--peer-client-cert-auth=true",
        ]
    return argv


def _local_flags(launch: MemberLaunch) -> list[str]:
    """LOCAL_FLAGS, then the spec's settings; a setting the spec names replaces the local default."""
    settings = [f"--{flag}={value}" for flag, value in member_settings(launch.spec)]
    named = {s.split("=", 1)[0] for s in settings}
    return [f for f in LOCAL_FLAGS if f.split("=", 1)[0] not in named] + settings


def etcd_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    # etcd refuses to start when an ETCD_* variable shadows a flag we pass; the user's shell
    # settings for their own etcd must not break ours.
    return {k: v for k, v in environ.items() if not k.startswith("ETCD_")}


def _check_scheme(launch: MemberLaunch, tls: bool) -> None:
    want = "https" if tls else "http"
    urls = [launch.urls.peer_url, launch.urls.client_url, *(url for _, url in launch.initial_cluster)]
    wrong = [url for url in urls if urlsplit(url).scheme != want]
    if wrong:
        raise ValueError(
            f"{launch.cluster}/{launch.name}: tls_enabled={tls} needs {want} URLs, got {', '.join(wrong)}"
            " (were the member's URLs allocated with another spec than the one it starts with?)"
        )

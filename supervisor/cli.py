"""`etcd-supervisor`: the process entry. Subcommands wire adapters to the actors."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import trio

from supervisor import __version__
from supervisor.gc_policy import tune_for_many_actors
from supervisor.logs import configure_logging


def _cluster_domain(value: str) -> str:
    # Imported here: `local` must not pay for the Kubernetes modules.
    from supervisor.kube.manifests import normalize_cluster_domain

    try:
        return normalize_cluster_domain(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _cidr(value: str) -> str:
    """An ipBlock's cidr as the API server takes it; a bare address is its /32 (/128)."""
    try:
        return str(ipaddress.ip_network(value.strip(), strict=False))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an address or CIDR: {value!r}") from exc


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="etcd-supervisor",
        description="Keeps etcd clusters alive: on Kubernetes (run) or as local processes (local).",
    )
    parser.add_argument("--version", action="version", version=f"etcd-supervisor {__version__}")
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"], help="log verbosity"
    )
    parser.add_argument("--log-format", default="json", choices=["json", "text"], help="log line format")
    parser.add_argument(
        "--log-level-file",
        type=Path,
        help="follow this file's log level at run time (on Kubernetes: the ConfigMap's LOG_LEVEL, mounted)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="operate EtcdCluster resources in a Kubernetes cluster")
    run.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config, then ~/.kube/config)")
    run.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        help="namespace to watch (repeatable; default: all)",
    )

    run.add_argument(
        "--metrics-port",
        "--health-port",
        dest="metrics_port",
        type=int,
        default=8080,
        help="port of /healthz, /readyz, /metrics and /loglevel (--health-port: the old name)",
    )
    run.add_argument(
        "--cluster-domain",
        type=_cluster_domain,
        default="cluster.local",
        help="the Kubernetes cluster's DNS domain; member URLs are <member>.<cluster>-peer.<ns>.svc.DOMAIN,"
        " fully qualified so they resolve from outside the cluster too (default: %(default)s)",
    )
    run.add_argument(
        "--helper-image",
        default=None,
        help="this operator's own image, run by the pods that verify and restore backups"
        " (default: $ETCD_SUPERVISOR_IMAGE, else the image of the pod the operator runs in)",
    )
    run.add_argument(
        "--operator-cidr",
        action="append",
        dest="operator_cidrs",
        type=_cidr,
        default=[],
        metavar="CIDR",
        help="the addresses this operator connects to members from when it runs outside the cluster"
        " (a laptop: its address as the pods see it); admitted by every cluster's NetworkPolicy"
        " as an ipBlock (repeatable; in a cluster its own pods are admitted without it)",
    )
    run.add_argument(
        "--monitoring-namespace",
        default=None,
        metavar="NAMESPACE",
        help="where Prometheus runs: the clusters' NetworkPolicies admit the metrics port from it"
        " (default: from each cluster's own namespace)",
    )

    receive = sub.add_parser(
        "receive-snapshot",
        help="(inside a backup pod) receive one snapshot the operator pushes; token in $SNAPSHOT_TOKEN",
    )
    receive.add_argument("--out", required=True, help="file to write the snapshot to")
    receive.add_argument("--port", type=int, default=2390, help="TCP port to listen on")
    receive.add_argument("--tls-cert", default=None, help="serve TLS with this certificate (and --tls-key)")
    receive.add_argument("--tls-key", default=None, help="the key of --tls-cert")

    decode = sub.add_parser(
        "decode-backup",
        help="decrypt and decompress a backup object fetched from the store into a plain etcd snapshot",
        epilog="e.g. aws s3 cp s3://b/etcd/NS/demo/X.db . && etcd-supervisor decode-backup X.db"
        " snapshot.db --key-file backup-key && etcdutl snapshot restore snapshot.db ...",
    )
    decode.add_argument("object", metavar="OBJECT", help="the object as stored (a plain one is copied)")
    decode.add_argument("out", metavar="OUT", help="where to write the plain snapshot")
    decode.add_argument(
        "--key-file",
        default=None,
        help="NAME=VALUE lines as spec.backup.encryption's Secret or file (`key`, older keys under"
        " other names); needed for an encrypted object",
    )

    local = sub.add_parser(
        "local",
        help="run clusters as etcd processes on loopback, no Kubernetes",
        epilog="`local env NAMESPACE/NAME` prints shell exports for etcdctl instead:"
        ' eval "$(etcd-supervisor local env default/demo --state-dir .state)"',
    )
    local.add_argument("file", metavar="FILE", help="YAML file with EtcdCluster documents (or: env)")
    # Only with `env`: a second positional keeps `local FILE` as it always was.
    local.add_argument("cluster", nargs="?", metavar="NAMESPACE/NAME", help="with env: the cluster")
    local.add_argument("--state-dir", default=".state", help="where member data and status.json live")
    local.add_argument("--no-board", action="store_true", help="no live status table on the terminal")
    local.add_argument(
        "--etcd-dir",
        default=None,
        help="where etcd builds live, one directory per version (<dir>/3.5.35/etcd); default:"
        " $ETCD_SUPERVISOR_ETCD_DIR, else ~/.cache/etcd-supervisor/etcd (`make etcd-versions` fills it)",
    )
    local.add_argument(
        "--leave-members-running",
        action="store_true",
        help="at exit, leave the etcd members running (a daemon upgrade); the next daemon adopts them",
    )
    local.add_argument(
        "--metrics-port",
        type=int,
        help="serve /metrics, /healthz, /readyz and /loglevel on this port (0: any; written to"
        " STATE_DIR/metrics-port); members serve their own /metrics (see `local env`)",
    )
    local.add_argument("--metrics-host", default="127.0.0.1", help="address for --metrics-port")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    tune_for_many_actors()
    if args.command == "local" and args.cluster is not None:
        if args.file != "env":
            parser.error(
                f"local takes one FILE; {args.cluster!r} is one too many (or: local env NAMESPACE/NAME)"
            )
        return _local_env(args.state_dir, args.cluster)
    if args.command == "local" and not args.no_board and sys.stdout.isatty():
        # The live table owns the terminal; logs go beside the data instead of over it.
        state_dir = Path(args.state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        configure_logging(
            level=args.log_level, fmt=args.log_format, stream=(state_dir / "supervisor.log").open("a")
        )
    else:
        configure_logging(level=args.log_level, fmt=args.log_format)
    if args.command == "receive-snapshot":
        return _receive_snapshot(Path(args.out), args.port, args.tls_cert, args.tls_key)
    if args.command == "decode-backup":
        return _decode_backup(Path(args.object), Path(args.out), args.key_file)
    if args.command == "local":
        from supervisor.local.daemon import run_local

        # Absolute once, here: etcd members run with their own directory as cwd, so a relative
        # state dir would name certificate files that do not exist from there.
        file, state_dir = Path(args.file).absolute(), Path(args.state_dir).absolute()
        if not file.is_file():
            hint = " (local env needs NAMESPACE/NAME)" if args.file == "env" else ""
            print(f"etcd-supervisor local: {file}: no such file{hint}", file=sys.stderr)
            return 2
        run = partial(
            run_local,
            file,
            state_dir,
            show_board=not args.no_board,
            leave_members_running=args.leave_members_running,
            metrics_port=args.metrics_port,
            metrics_host=args.metrics_host,
            log_level_file=args.log_level_file,
            etcd_dir=Path(args.etcd_dir).absolute() if args.etcd_dir else None,
        )
        trio.run(run)
        return 0
    from supervisor.kube.clusters import run_kube
    from supervisor.kube.network_policy import OperatorAccess

    trio.run(
        partial(
            run_kube,
            kubeconfig=args.kubeconfig,
            namespaces=args.namespaces,
            health_port=args.metrics_port,
            cluster_domain=args.cluster_domain,
            log_level_file=args.log_level_file,
            helper_image=args.helper_image,
            access=OperatorAccess(
                cidrs=tuple(args.operator_cidrs), monitoring_namespace=args.monitoring_namespace
            ),
        )
    )
    return 0


def _receive_snapshot(out: Path, port: int, cert: str | None, key: str | None) -> int:
    from supervisor.kube.snapshot_transfer import receive_snapshot, server_tls

    token = os.environ.get("SNAPSHOT_TOKEN", "")
    if not token:
        print("etcd-supervisor receive-snapshot: $SNAPSHOT_TOKEN is not set", file=sys.stderr)
        return 2
    if (cert is None) != (key is None):
        print("etcd-supervisor receive-snapshot: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    tls = server_tls(Path(cert), Path(key)) if cert and key else None
    got = trio.run(partial(receive_snapshot, out, port=port, token=token, tls=tls))
    print(f"received {got.size} bytes, sha256 {got.sha256}")
    return 0


def _decode_backup(source: Path, target: Path, key_file: str | None) -> int:
    from actors.backup.keys import key_ring_from
    from actors.errors import StoreError
    from supervisor.stores.credentials import parse_key_values
    from supervisor.stores.decode import decode_file

    try:
        ring = None
        if key_file is not None:
            ring = key_ring_from(parse_key_values(Path(key_file).read_text()), f"the key file {key_file}")
        size, sha256 = decode_file(source, target, ring)
    except (StoreError, OSError) as exc:
        print(f"etcd-supervisor decode-backup: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {target}: {size} bytes, sha256 {sha256} (the metadata's snapshotSha256)")
    return 0


def _local_env(state_dir: str, cluster: str) -> int:
    from supervisor.local.env import EnvError, env_exports

    try:
        sys.stdout.write(env_exports(Path(state_dir), cluster))
    except EnvError as exc:
        print(f"etcd-supervisor local env: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

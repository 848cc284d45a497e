"""What the e2e tests and bench/bench_formation.py share: the reference (three static etcd
pods), the operator as a host process, forming an EtcdCluster, and timing both by watching
the API server (tests/harness/watch.py).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from actors.codec import parse_spec
from actors.model import MemberLaunch
from supervisor.kube import manifests as m
from supervisor.kube.tls import generate_cluster_tls
from tests.harness import etcd_versions, images
from tests.harness.cluster import Cluster
from tests.harness.components import missing
from tests.harness.kube import DEPLOY_BASE, OPERATOR_NAMESPACE, OPERATOR_SERVICE_ACCOUNT
from tests.harness.node import ROOT
from tests.harness.poll import until
from tests.harness.procs import stop
from tests.harness.watch import KubectlWatch

# Filled as the tests run; the operator test divides by the static pods' time.
TIMINGS: dict[str, float] = {}


def wait_for(
    what: str, check: Any, timeout: float, poll: float = 0.2, details: Callable[[], str] | None = None
) -> Any:
    """The first truthy `check()`; TimeoutError naming `what` (and `details()`) after `timeout` s."""
    return until(check, within=timeout, every=poll, what=what, details=details)


def pods(cluster: Cluster, namespace: str, selector: str) -> list[dict[str, Any]]:
    return list(cluster.get_json("pods", "-l", selector, namespace=namespace)["items"])


def is_ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def static_members(namespace: str, version: str, names: list[str]) -> list[dict[str, Any]]:
    host = lambda n: f"{n}.static-peer.{namespace}.svc.cluster.local"  # noqa: E731
    initial = ",".join(f"{n}=http://{host(n)}:2380" for n in names)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "static-peer", "namespace": namespace},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {"app": "static"},
            "ports": [{"name": "peer", "port": 2380}],
        },
    }
    # The same image, volume kind, probe and DNS names as the operator's members: only the
    # orchestration differs.
    out = [service]
    for n in names:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": n, "namespace": namespace, "labels": {"app": "static"}},
                "spec": {
                    "hostname": n,
                    "subdomain": "static-peer",
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "etcd",
                            "image": f"{images.ETCD_REPOSITORY}:v{version}",
                            "command": ["/usr/local/bin/etcd"],
                            "args": [
                                f"--name={n}",
                                "--data-dir=/var/lib/etcd/data",
                                "--listen-peer-urls=http://0.0.0.0:2380",
                                "--listen-client-urls=http://0.0.0.0:2379",
                                "--listen-metrics-urls=http://0.0.0.0:2381",
                                f"--advertise-client-urls=http://{host(n)}:2379",
                                f"--initial-advertise-peer-urls=http://{host(n)}:2380",
                                f"--initial-cluster={initial}",
                                "--initial-cluster-state=new",
                                "--initial-cluster-token=static",
                            ],
                            "readinessProbe": {
                                "httpGet": {"path": "/health?serializable=true", "port": 2381},
                                "initialDelaySeconds": 0,
                                "periodSeconds": 1,
                                "failureThreshold": 3,
                            },
                            "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
                        }
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                },
            }
        )
    return out


STATIC_NAMES = ["static-0", "static-1", "static-2"]
STATIC_LABELS = {"app": "static"}


def twin_members(namespace: str, version: str, *, tls: bool) -> list[dict[str, Any]]:
    """Three pods made by the operator's own manifests for a 3-member EtcdCluster named
    "static" (the same pod spec, claims, TLS Secret and peer Service), but started at once with
    the whole membership: an EtcdCluster's pods, only without the staged bootstrap.

    The bare static pods above mount neither a Secret nor a claim; a new pod that mounts them
    pays the kubelet's work for it (and, at times, its retry after the node authorizer refused
    a read it had not caught up with: Kubernetes' cost, paid by every such pod). These pods
    pay the same, so the ratio against them is the orchestration's alone. Without owner
    references and under labels of their own, so no operator ever takes them for its members."""
    ref = m.ClusterRef(namespace, "static")
    owner = m.Owner(ref, uid="static")
    spec = parse_spec(etcd_cluster(ref.name, version, tls=tls)["spec"])
    urls = {n: m.member_urls(ref, n, tls=tls) for n in STATIC_NAMES}
    members = tuple((n, u.peer_url) for n, u in urls.items())
    # Members only (no warm pods here): the selector _unowned recognises as the members'.
    objects = [m.peer_service(owner, warm_records=False)]
    if tls:
        material = generate_cluster_tls(ref, now=dt.datetime.now(dt.UTC))
        objects.append(m.tls_secret(owner, material.secret_data()))
    for n in STATIC_NAMES:
        objects.append(m.member_volume_claim(owner, spec, n, urls[n]))
        launch = MemberLaunch(ref, n, urls[n], members, "new", spec)
        objects.append(m.member_pod(owner, launch))
    return [_unowned(o, m.member_selector(ref)) for o in objects]


def _unowned(obj: Any, selector: dict[str, str]) -> Any:
    """`obj` with no owner, no annotations, and STATIC_LABELS wherever it had the members'."""
    if isinstance(obj, list):
        return [_unowned(o, selector) for o in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for key, value in obj.items():
        if key in ("ownerReferences", "annotations"):
            continue
        selects_members = isinstance(value, dict) and selector.items() <= value.items()
        if key == "labels" or (key in ("selector", "matchLabels") and selects_members):
            out[key] = dict(STATIC_LABELS)
        else:
            out[key] = _unowned(value, selector)
    return out


def time_static_pods(cluster: Cluster, namespace: str) -> float:
    """Apply the three static pods; seconds until the API server shows all of them Ready."""
    ready = KubectlWatch(
        cluster.kubeconfig,
        ["pods", "-n", namespace, "-l", "app=static"],
        "{.metadata.name} {.status.conditions[?(@.type=='Ready')].status}{'\\n'}",
    )
    with ready:
        start = time.monotonic()
        cluster.apply(static_members(namespace, cluster.etcd_version, STATIC_NAMES))
        all_ready_at = ready.until(
            "3 static etcd pods Ready", lambda lines: all_ready(lines, STATIC_NAMES), 120
        )
    return all_ready_at - start


@attrs.frozen
class StaticTimes:
    ready: float  # apply -> all three pods Ready (their probe: etcd up, no leader needed)
    serving: float  # apply -> all three answer etcd's linearizable /health (a leader, a quorum read)


def time_static_cluster(
    cluster: Cluster, namespace: str, objects: list[dict[str, Any]] | None = None
) -> StaticTimes:
    """Apply the three static pods (or `objects`: twin_members); seconds until all are Ready,
    and until the three form a cluster that serves: each answers /health, which needs a leader
    and a quorum read, the state an EtcdCluster's Running stands for (its members answer with
    a leader). The second is asked of each pod's address every 10 ms from when the API server
    shows it."""
    if objects is None:
        objects = static_members(namespace, cluster.etcd_version, STATIC_NAMES)
    line = "{.metadata.name} {.status.podIP} {.status.conditions[?(@.type=='Ready')].status}{'\\n'}"
    ready = KubectlWatch(cluster.kubeconfig, ["pods", "-n", namespace, "-l", "app=static"], line)
    with ready:
        start = time.monotonic()
        serving: list[float] = []
        poller = threading.Thread(target=lambda: serving.append(_until_all_serve(ready, start)), daemon=True)
        cluster.apply(objects, namespace=namespace)
        poller.start()
        all_ready_at = ready.until(
            "3 static etcd pods Ready", lambda lines: all_ready(_without_ips(lines), STATIC_NAMES), 120
        )
        poller.join(120)
    assert serving, "the static pods did not all answer /health within 120s"
    return StaticTimes(ready=all_ready_at - start, serving=serving[0] - start)


def _without_ips(lines: list[str]) -> list[str]:
    return [f"{name} {rest.partition(' ')[2]}" for name, _, rest in (ln.partition(" ") for ln in lines)]


def _until_all_serve(watch: KubectlWatch, start: float, timeout: float = 120) -> float:
    """When the last static pod first answered /health, polling each address the watch shows."""
    served: dict[str, float] = {}
    while len(served) < len(STATIC_NAMES) and time.monotonic() - start < timeout:
        ips = {name: ip for name, ip, *_ in (ln.split(" ") for ln in watch.lines) if ip}
        for name, ip in ips.items():
            if name not in served and _etcd_healthy(ip):
                served[name] = time.monotonic()
        time.sleep(0.01)
    return max(served.values()) if len(served) == len(STATIC_NAMES) else float("inf")


def _etcd_healthy(ip: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{ip}:2381/health", timeout=0.5) as resp:
            return bool(json.load(resp).get("health") == "true")
    except (OSError, ValueError):
        return False


def all_ready(lines: list[str], names: list[str]) -> bool:
    """Whether the latest line of each pod says Ready=True."""
    latest = {name: ready for name, _, ready in (line.partition(" ") for line in lines)}
    return all(latest.get(n) == "True" for n in names)


def operator_kubeconfig(cluster: Cluster, work: Path) -> Path:
    """deploy/base without its Deployment (the operator runs on the host here), and a
    kubeconfig with the operator ServiceAccount's token: exactly the deployed rights."""
    rendered = cluster.kubectl("kustomize", DEPLOY_BASE).stdout
    objs = [o for o in yaml.safe_load_all(rendered) if o and o["kind"] != "Deployment"]
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(objs))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/etcdclusters.etcd.io")
    token = cluster.kubectl(
        "create", "token", OPERATOR_SERVICE_ACCOUNT, "-n", OPERATOR_NAMESPACE, "--duration=2h"
    ).stdout.strip()
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for ctx in config["contexts"]:
        ctx["context"]["user"] = "operator"
    config["users"] = [{"name": "operator", "user": {"token": token}}]
    path = work / "operator.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def _http_ok(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def etcd_cluster(
    name: str, version: str, *, tls: bool, repository: str = images.ETCD_REPOSITORY
) -> dict[str, Any]:
    return {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name},
        "spec": {
            "size": 3,
            "version": version,
            "repository": repository,
            "storage": {"size": "1Gi", "reclaimPolicy": "Delete"},
            "security": {"tls": {"enabled": tls}},
        },
    }


def import_pinned_etcd(cluster: Cluster, minor: str) -> str:
    """The pinned patch of etcd `minor` (3.7 -> 3.7.3), its image imported on the built-in node
    (the default version's is there already); a missing build fails (skips outside CI)."""
    assert cluster.node is not None, "images are imported on the built-in node only"
    version = etcd_versions.pinned(minor)
    if version != cluster.etcd_version:
        found = etcd_versions.find_built(version)
        if isinstance(found, str):
            missing(found)
        archive, version = images.etcd_archive(ROOT / "images", found.etcd.parent)
        cluster.node.import_image(archive)
    return version


def form_cluster(
    cluster: Cluster,
    namespace: str,
    name: str,
    *,
    tls: bool,
    version: str | None = None,
    repository: str = images.ETCD_REPOSITORY,
) -> tuple[float, dict[str, Any]]:
    """Apply a 3-member EtcdCluster; until Running. Returns (seconds, every pod seen by uid).

    Both are watched (tests/harness/watch.py), so the time is when the API server showed Running."""
    selector = f"{m.LABEL_INSTANCE}={name},{m.LABEL_COMPONENT}={m.COMPONENT_MEMBER}"
    cluster_args = ["etcdclusters", "-n", namespace, f"--field-selector=metadata.name={name}"]
    pod_args = ["pods", "-n", namespace, "-l", selector]
    with (
        KubectlWatch(cluster.kubeconfig, cluster_args, "{.status.phase}{'\\n'}") as phases,
        KubectlWatch(cluster.kubeconfig, pod_args, POD_LINE) as pod_lines,
    ):
        start = time.monotonic()
        spec = etcd_cluster(name, version or cluster.etcd_version, tls=tls, repository=repository)
        cluster.apply([spec], namespace=namespace)
        running_at = phases.until(f"EtcdCluster {name} Running", lambda lines: lines[-1] == "Running", 180)
        return running_at - start, pods_seen(pod_lines.drain())


# One line per pod event: uid, name, phase.
POD_LINE = "{.metadata.uid} {.metadata.name} {.status.phase}{'\\n'}"


def pods_seen(lines: list[str]) -> dict[str, Any]:
    """The pods of POD_LINE lines by uid, each as much of a pod object as the checks read."""
    seen: dict[str, Any] = {}
    for line in lines:
        uid, pod_name, *phase = line.split()
        seen.setdefault(uid, {"metadata": {"uid": uid, "name": pod_name}, "status": {}})
        if phase and seen[uid]["status"].get("phase") != "Failed":
            seen[uid]["status"]["phase"] = phase[0]
    return seen


def assert_no_member_failed(seen: dict[str, Any]) -> None:
    names = sorted(p["metadata"]["name"] for p in seen.values())
    failed = [p["metadata"]["name"] for p in seen.values() if p["status"].get("phase") == "Failed"]
    assert not failed, f"member pods failed: {failed}"
    assert len(seen) == 3, f"member pods were recreated: {names}"


def tls_files(cluster: Cluster, namespace: str, name: str, work: Path) -> list[str]:
    data = cluster.get_json("secret", m.tls_secret_name(m.ClusterRef(namespace, name)), namespace=namespace)[
        "data"
    ]
    flags = []
    for key, flag in ((m.TLS_CA_CERT, "cacert"), (m.TLS_CLIENT_CERT, "cert"), (m.TLS_CLIENT_KEY, "key")):
        (work / key).write_bytes(base64.b64decode(data[key]))
        flags.append(f"--{flag}={work / key}")
    return flags


def kill_operator(namespace: str) -> None:
    """SIGKILL the operator watching `namespace` (its process group: the wrapper and the daemon)."""
    found = subprocess.run(["pgrep", "-f", f"--namespace {namespace}"], capture_output=True, text=True)
    for pid in found.stdout.split():
        subprocess.run(["kill", f"-{signal.SIGKILL.value}", pid], check=False)


@contextlib.contextmanager
def run_operator(
    cluster: Cluster,
    namespace: str | None,
    work: Path,
    log: Path,
    *,
    helper_image: str | None = None,
    operator_cidrs: Sequence[str] = (),
) -> Iterator[Path]:
    """`etcd-supervisor run` on this host, watching `namespace` (None: all), once it is ready;
    yields its log. With `helper_image` (the operator image, imported on the node) it makes warm
    member pods and snapshot pods as an in-cluster operator does.

    `work` holds its kubeconfig; on the built-in node put both under ROOT, so that the node's
    cleanup finds this process (by its command line) after a crashed run."""
    work.mkdir(parents=True, exist_ok=True)
    kubeconfig = operator_kubeconfig(cluster, work)
    cli = Path(sys.executable).parent / "etcd-supervisor"
    health = _free_port()
    run: list[str | os.PathLike[str]] = ["run", "--kubeconfig", kubeconfig, "--health-port", str(health)]
    if namespace is not None:
        run += ["--namespace", namespace]
    if helper_image is not None:
        run += ["--helper-image", helper_image]
    for cidr in operator_cidrs:  # where its connections come from, for NetworkPolicies
        run += ["--operator-cidr", cidr]
    cmd = cluster.host_dns_command([cli, "--log-format", "text", *run])
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # Ready (leader, watches synced) before any clock starts: a daemon that runs already,
        # as in a real cluster, not its start-up, is what the timings compare.
        wait_for("the operator's /readyz", lambda: proc.poll() is None and _http_ok(health), 60)
        log.with_suffix(".port").write_text(f"{health}\n")  # its /metrics, for the tests that look
        yield log
    finally:
        stop(proc)

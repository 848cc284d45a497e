"""A stand-in kubelet for the kube tier: runs each member pod as a real etcd process.

The test API server has no nodes, so nothing would ever run the pods the operator creates.
This plays the kubelet's part as faithfully as one machine allows:

- each pod gets its own loopback address (127.W.N.M, W the xdist worker: never handed out twice), and
  its DNS names (member_host's fully qualified <member>.<cluster>-peer.<ns>.svc.<domain>, and
  the short form ending in .svc that the search path resolves in a pod, as the headless Service
  would publish them) resolve there through /etc/hosts, so the operator and the members reach
  each other exactly by the URLs the operator wrote;
- the pod's own etcd command line runs, on the etcd its image tag names (the per-version cache),
  with 0.0.0.0 bound to the pod's address and the data directory on a per-claim directory (per
  claim object: one made again under the same name is empty), so a pod recreated on the same
  claim keeps its data;
- pod status (phase Running, podIP, Ready once the client port answers) is written through
  the pods/status subresource, as a kubelet would; a deleted pod's process is killed.

Needs root (for /etc/hosts); every line it adds carries a marker and is removed afterwards.
"""

from __future__ import annotations

import base64
import fcntl
import itertools
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from actors.model import ClusterRef
from supervisor.kube import manifests as m
from supervisor.kube.client import KubeClient, KubeError, is_conflict, is_not_found
from tests.harness.etcd_versions import cache_dir

HOSTS = Path("/etc/hosts")
_MESSAGE_BYTES = 2048  # the kubelet's cap on a termination message taken from the log
ETCD = Path(sys.executable).parent / "etcd"  # when the image's version is not built here


def etcd_for(image: str) -> Path:
    """The etcd the pod's image tag names (quay.io/coreos/etcd:v3.5.35 -> the per-version
    cache's 3.5.35), as the real image would run: member flags depend on the version."""
    version = image.rsplit(":", 1)[-1].removeprefix("v")
    built = cache_dir(version) / "etcd"
    return built if built.is_file() else ETCD


_hosts_lock = threading.Lock()
# /etc/hosts is edited by every pytest process that runs a stand-in kubelet: a file lock keeps
# their read-modify-writes from losing each other's lines.
HOSTS_LOCK = Path("/tmp/etcd-supervisor-hosts.lock")

# Pod addresses handed out in this session: each new pod gets one never used before, as a CNI's
# address management would give it. Reusing one from test to test (each kubelet counted from
# 127.0.0.10) made a new seed's peer port collide with a listener already there in parallel runs
# ("bind: address already in use", the seed crash-looping for the rest of the test).
_addresses = itertools.count()
# Each pytest-xdist worker hands out addresses of its own 127.<worker>.0.0/16, so two processes
# never give the same address to two pods.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0) % 250


def next_pod_address() -> str:
    """A loopback address no pod of this session had, with nothing listening on the member ports."""
    while True:
        n = next(_addresses)
        ip = f"127.{_WORKER}.{n // 240}.{10 + n % 240}"
        if all(_port_free(ip, port) for port in (m.CLIENT_PORT, m.PEER_PORT)):
            return ip


def _port_free(ip: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((ip, port))
        except OSError:
            return False
    return True


def _edit_hosts(add: list[str] = (), drop_marker: str | None = None) -> None:  # type: ignore[assignment]
    with _hosts_lock, HOSTS_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lines = HOSTS.read_text().splitlines()
        if drop_marker is not None:
            lines = [line for line in lines if not line.endswith(drop_marker)]
        HOSTS.write_text("\n".join([*lines, *add]) + "\n")


@attrs.define
class PodProcess:
    name: str
    uid: str
    ip: str
    proc: subprocess.Popen[bytes]
    ready: bool = False
    exit_reported: bool = False


@attrs.define
class Kubelet:
    admin: KubeClient
    namespace: str
    work: Path
    marker: str
    cluster_domain: str = m.DEFAULT_CLUSTER_DOMAIN  # the operator's --cluster-domain
    pods: dict[str, PodProcess] = attrs.field(factory=dict)
    started: list[str] = attrs.field(factory=list)  # pod names in the order they first ran
    runs: list[str] = attrs.field(factory=list)  # pod names at every start, a replaced pod's again
    # Pod name -> the message the scheduler gives for it: such a pod is not run, its status says
    # PodScheduled False (Unschedulable) as the scheduler writes it, until the name is dropped.
    unschedulable: dict[str, str] = attrs.field(factory=dict)
    _marked_unschedulable: set[str] = attrs.field(factory=set)

    async def run(self, *, poll: float = 0.2) -> None:
        while True:
            listing = await self.admin.get(m.core_path(self.namespace, "pods"))
            seen = {}
            for pod in listing.get("items", []):
                meta = pod["metadata"]
                if meta.get("deletionTimestamp"):
                    continue
                seen[meta["name"]] = meta["uid"]
                running = self.pods.get(meta["name"])
                if running is not None and running.uid != meta["uid"]:
                    self._kill(meta["name"])  # replaced by a new pod of the same name
                    running = None
                if running is None and meta["name"] in self.unschedulable:
                    if meta["uid"] not in self._marked_unschedulable:
                        await self._mark_unschedulable(pod, self.unschedulable[meta["name"]])
                        self._marked_unschedulable.add(meta["uid"])
                    continue
                if running is None:
                    await self._start(pod)
                    await self._write_status(pod["metadata"]["name"])
                elif running.proc.poll() is not None:
                    if not running.exit_reported:  # restartPolicy Never: the pod has failed
                        running.ready, running.exit_reported = False, True
                        await self._write_status(running.name)
                elif not running.ready and self._answers(running):
                    running.ready = True
                    await self._write_status(running.name)
            for name in set(self.pods) - set(seen):
                self._kill(name)
            await trio.sleep(poll)

    async def _volumes(self, pod: dict[str, Any]) -> dict[str, Path]:
        """Each volume as a host directory: a claim's survives its pods, a Secret's is written out."""
        out: dict[str, Path] = {}
        for volume in pod["spec"]["volumes"]:
            if "persistentVolumeClaim" in volume:
                # A volume per claim object, as a provisioner gives: a claim deleted and made
                # again under the same name (a member replaced) is a new, empty volume.
                claim_name = volume["persistentVolumeClaim"]["claimName"]
                claim = await self.admin.get_or_none(
                    m.core_path(self.namespace, "persistentvolumeclaims", claim_name)
                )
                uid = claim["metadata"]["uid"][:8] if claim is not None else "unbound"
                path = self.work / "volumes" / f"{claim_name}-{uid}"
                path.mkdir(parents=True, exist_ok=True)
            else:
                source = volume["secret"]
                secret = await self.admin.get(m.core_path(self.namespace, "secrets", source["secretName"]))
                path = self.work / "secrets" / pod["metadata"]["uid"] / volume["name"]
                path.mkdir(parents=True, exist_ok=True)
                for item in source.get("items") or [{"key": k, "path": k} for k in secret["data"]]:
                    (path / item["path"]).write_bytes(base64.b64decode(secret["data"][item["key"]]))
            out[volume["name"]] = path
        return out

    async def _start(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        labels = pod["metadata"]["labels"]
        ref = ClusterRef(self.namespace, labels["app.kubernetes.io/instance"])
        ip = next_pod_address()
        host = m.member_host(ref, name, self.cluster_domain)
        short = host.removesuffix(f".{self.cluster_domain}")
        _edit_hosts(add=[f"{ip} {host} {short} {self.marker}"])
        container = pod["spec"]["containers"][0]
        volumes = await self._volumes(pod)
        args = []
        for arg in container.get("args", []):
            arg = arg.replace("0.0.0.0", ip)
            for mount in container.get("volumeMounts", []):
                arg = arg.replace(mount["mountPath"], str(volumes[mount["name"]]))
            args.append(arg)
        log = (self.work / f"{name}.log").open("ab")
        # Popen returns at once; these processes outlive any trio scope, as pods outlive a kubelet call.
        etcd = etcd_for(container["image"])
        proc = subprocess.Popen([str(etcd), *args], stdout=log, stderr=subprocess.STDOUT)  # noqa: ASYNC220
        self.pods[name] = PodProcess(name, pod["metadata"]["uid"], ip, proc)
        self.runs.append(name)
        if name not in self.started:
            self.started.append(name)

    def _answers(self, pod: PodProcess) -> bool:
        if pod.proc.poll() is not None:
            return False
        try:
            with socket.create_connection((pod.ip, m.CLIENT_PORT), timeout=0.2):
                return True
        except OSError:
            return False

    async def _mark_unschedulable(self, pod: dict[str, Any], message: str) -> None:
        status = {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
            ],
        }
        path = m.core_path(self.namespace, "pods", pod["metadata"]["name"])
        try:
            await self.admin.merge_patch(
                f"{path}/status", {"metadata": {"uid": pod["metadata"]["uid"]}, "status": status}
            )
        except KubeError as exc:
            if not (is_not_found(exc) or is_conflict(exc)):
                raise

    async def _write_status(self, name: str) -> None:
        pod = self.pods[name]
        path = m.core_path(self.namespace, "pods", name)
        obj = await self.admin.get_or_none(path)
        if obj is None or obj["metadata"]["uid"] != pod.uid:
            # Deleted (or replaced) since it was listed; the next pass kills this process.
            return
        exited = pod.proc.poll()
        state: dict[str, Any] = (
            {"terminated": self._terminated(pod, exited)}
            if exited is not None
            else {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
        )
        status = {
            "phase": "Failed" if exited is not None else "Running",
            "podIP": pod.ip,
            "conditions": [{"type": "Ready", "status": "True" if pod.ready else "False"}],
            "containerStatuses": [
                {
                    "name": "etcd",
                    "image": obj["spec"]["containers"][0]["image"],
                    "imageID": "",
                    "ready": pod.ready,
                    "restartCount": 0,
                    "state": state,
                }
            ],
        }
        # A merge patch, as the kubelet's status manager writes: an annotation or label written
        # meanwhile (the operator's nudge) is no conflict. The uid is a precondition: a pod
        # replaced since the read answers 409, and the next pass deals with it.
        patch = {"metadata": {"uid": pod.uid}, "status": status}
        try:
            await self.admin.merge_patch(f"{path}/status", patch)
        except KubeError as exc:
            if not (is_not_found(exc) or is_conflict(exc)):  # gone or replaced in between
                raise

    def _terminated(self, pod: PodProcess, exited: int) -> dict[str, Any]:
        state: dict[str, Any] = {
            # As container runtimes report it: 128 + N for a kill by signal N.
            "exitCode": 128 - exited if exited < 0 else exited,
            "startedAt": "2026-01-01T00:00:00Z",
            "finishedAt": "2026-01-01T00:00:01Z",
        }
        if exited != 0:
            # The member pod's terminationMessagePolicy, FallbackToLogsOnError, as the kubelet
            # applies it: the log's last lines (at most 2 KiB) become the termination message.
            tail = (self.work / f"{pod.name}.log").read_bytes()[-_MESSAGE_BYTES:]
            state["message"] = tail.decode(errors="replace")
        return state

    def _kill(self, name: str) -> None:
        pod = self.pods.pop(name)
        if pod.proc.poll() is None:
            pod.proc.kill()
            pod.proc.wait()

    def kill_process(self, name: str) -> int:
        """SIGKILL a member's etcd as a node failure would; returns its pid."""
        pod = self.pods[name]
        pod.proc.kill()
        pod.proc.wait()
        return pod.proc.pid

    def stop_all(self) -> None:
        for name in list(self.pods):
            self._kill(name)


@contextmanager
def open_kubelet(admin: KubeClient, namespace: str, work: Path) -> Iterator[Kubelet]:
    """A Kubelet for one namespace; its processes and /etc/hosts lines go away on exit."""
    if os.geteuid() != 0:
        raise PermissionError("the stand-in kubelet edits /etc/hosts and needs root")
    marker = f"# etcd-supervisor-test {namespace} {os.getpid()}"
    kubelet = Kubelet(admin, namespace, work, marker)
    try:
        yield kubelet
    finally:
        kubelet.stop_all()
        _edit_hosts(drop_marker=marker)

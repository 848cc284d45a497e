"""Where the local runtime keeps things on disk, and the small records it persists there.

    state_dir/<namespace>/<cluster>/cluster.json          what the runtime must remember per cluster (TLS)
    state_dir/<namespace>/<cluster>/status.json           written by status_files
    state_dir/<namespace>/<cluster>/tls/                  CA and the daemon's client cert (TLS clusters)
    state_dir/<namespace>/<cluster>/members/<member>/member.json, data/, etcd.log, etcd.pid, tls/
    state_dir/<namespace>/<cluster>/members/<member>/process.json  the running etcd's pid, start time
                                                                   and argv, for the next daemon
    state_dir/prometheus-targets.json                     every supervised member's /metrics (file_sd)

Everything the runtime reports is read back from this tree, so a daemon restarted on the same
state_dir sees the members the previous one left behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attrs import frozen

from actors.model import ClusterRef, MemberUrls
from supervisor.local.processes import ProcessIdentity

MEMBER_FILE = "member.json"


@frozen
class StoredMember:
    """member.json: a member's identity and addresses, persisted at allocation; at each start,
    the etcd version and member configuration (fingerprint) it was started with."""

    name: str
    urls: MemberUrls
    # etcd's own /metrics (--listen-metrics-urls, plain HTTP on loopback); None in older state dirs.
    metrics_port: int | None = None
    # At each start: the etcd version and member configuration (fingerprint) it started with.
    version: str = ""
    config: str = ""
    # The trust digest of the CA material it was started with (pki.trust_digest; "" without TLS).
    trust: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "peerURL": self.urls.peer_url,
            "clientURL": self.urls.client_url,
        }
        if self.metrics_port is not None:
            data["metricsPort"] = self.metrics_port
        if self.config:
            data |= {"version": self.version, "config": self.config}
        if self.trust:
            data["trust"] = self.trust
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StoredMember:
        port = data.get("metricsPort")
        return cls(
            name=str(data["name"]),
            urls=MemberUrls(str(data["peerURL"]), str(data["clientURL"])),
            metrics_port=port if isinstance(port, int) else None,
            version=str(data.get("version", "")),
            config=str(data.get("config", "")),
            trust=str(data.get("trust", "")),
        )


@frozen
class ClusterLayout:
    root: Path  # state_dir/<namespace>/<cluster>

    @property
    def members_dir(self) -> Path:
        return self.root / "members"

    @property
    def tls_dir(self) -> Path:
        return self.root / "tls"

    @property
    def status_file(self) -> Path:
        return self.root / "status.json"

    def member(self, name: str) -> MemberLayout:
        return MemberLayout(self.members_dir / name)


@frozen
class MemberLayout:
    root: Path  # .../members/<member>

    @property
    def member_file(self) -> Path:
        return self.root / MEMBER_FILE

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "etcd.log"

    @property
    def pid_file(self) -> Path:
        return self.root / "etcd.pid"

    @property
    def process_file(self) -> Path:
        return self.root / "process.json"

    @property
    def tls_dir(self) -> Path:
        return self.root / "tls"

    def has_data(self) -> bool:
        # etcd creates member/wal before it first serves; an empty data dir is no data.
        return (self.data_dir / "member" / "wal").is_dir()


@frozen
class StateLayout:
    state_dir: Path

    def cluster(self, ref: ClusterRef) -> ClusterLayout:
        _check_segment(ref.namespace)
        _check_segment(ref.name)
        return ClusterLayout(self.state_dir / ref.namespace / ref.name)

    def member(self, ref: ClusterRef, name: str) -> MemberLayout:
        _check_segment(name)
        return self.cluster(ref).member(name)

    @property
    def scrape_targets_file(self) -> Path:
        return self.state_dir / "prometheus-targets.json"

    def all_member_files(self) -> Iterator[Path]:
        """member.json of every member of every cluster under state_dir."""
        return self.state_dir.glob(f"*/*/members/*/{MEMBER_FILE}")

    def all_members(self) -> Iterator[tuple[ClusterRef, MemberLayout]]:
        """Every member directory with a member.json, and the cluster it belongs to."""
        for path in self.all_member_files():
            # state_dir/<namespace>/<cluster>/members/<member>/member.json
            yield ClusterRef(path.parents[3].name, path.parents[2].name), MemberLayout(path.parent)


def _check_segment(segment: str) -> None:
    # Names come from user YAML; a "../x" must never steer a delete outside state_dir.
    if not segment or segment in (".", "..") or "/" in segment or "\0" in segment:
        raise ValueError(f"not a valid name for a directory: {segment!r}")


def read_member(layout: MemberLayout) -> StoredMember | None:
    try:
        return StoredMember.from_dict(json.loads(layout.member_file.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_process(layout: MemberLayout) -> ProcessIdentity | None:
    """The process a daemon recorded as running this member, if it recorded one."""
    try:
        return ProcessIdentity.from_dict(json.loads(layout.process_file.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record_process(layout: MemberLayout, process: ProcessIdentity) -> None:
    """What a later daemon checks before adopting the process; the pid file is for people."""
    write_json_atomically(layout.process_file, process.to_dict())
    layout.pid_file.write_text(f"{process.pid}\n")


def forget_process(layout: MemberLayout) -> None:
    for path in (layout.process_file, layout.pid_file):
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


def write_file_atomically(path: Path, content: bytes, *, mode: int) -> None:
    # Written aside, then renamed over: a reader opens the old file or the new one, never half.
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(content)
    os.replace(tmp, path)


def write_json_atomically(path: Path, data: Any) -> None:
    """Readers see the old file or the new one, never a torn write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

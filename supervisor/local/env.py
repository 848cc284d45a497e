"""`etcd-supervisor local env NAMESPACE/NAME`: shell exports that point etcdctl at a local cluster.

Read from what the daemon leaves on disk (status.json for the endpoints, tls/ for the client
certificate), so it works from any terminal while the daemon runs, without talking to it.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors.model import ClusterRef
from supervisor.local.layout import ClusterLayout, StateLayout

# What etcdctl reads from its environment; a plain cluster unsets the TLS ones, so a shell that
# pointed at a TLS cluster before does not carry stale certificates over.
TLS_VARIABLES = ("ETCDCTL_CACERT", "ETCDCTL_CERT", "ETCDCTL_KEY")


class EnvError(Exception):
    """Why no exports can be printed, in a sentence for the user."""


def parse_target(target: str) -> ClusterRef:
    """NAMESPACE/NAME, or NAME for the default namespace (as kubectl does)."""
    namespace, slash, name = target.partition("/")
    if not slash:
        namespace, name = "default", target
    if not namespace or not name or "/" in name:
        raise EnvError(f"{target!r}: expected NAMESPACE/NAME, e.g. default/demo")
    return ClusterRef(namespace, name)


def env_command(state_dir: Path, program: str | None = None) -> Callable[[ClusterRef], str]:
    """What the board shows a person for etcdctl: the command as they would type it here.

    The state dir relative to the working directory when it lies below it (as given to
    `local`, usually), absolute otherwise; the program as the daemon itself was invoked
    (`.venv/bin/etcd-supervisor` under `make run`), so the command works as shown.
    """
    if program is None:
        invoked = sys.argv[0] if sys.argv else ""
        program = invoked if Path(invoked).name == "etcd-supervisor" else "etcd-supervisor"
    tail = f"--state-dir {shlex.quote(str(as_typed(state_dir)))}"

    def command(ref: ClusterRef) -> str:
        return f'eval "$({shlex.quote(program)} local env {ref} {tail})"'

    return command


def as_typed(path: Path) -> Path:
    """A path made absolute at start-up, shown as it was probably typed: relative to the
    working directory when below it (shorter on the board, and still right from here)."""
    with contextlib.suppress(ValueError):
        return path.relative_to(Path.cwd())
    return path


def env_exports(state_dir: Path, target: str) -> str:
    """The shell lines to eval for etcdctl, or EnvError naming what is missing."""
    ref = parse_target(target)
    state_dir = state_dir.absolute()
    try:
        layout = StateLayout(state_dir).cluster(ref)
    except ValueError as exc:
        raise EnvError(f"{target!r}: {exc}") from exc
    status = _read_status(layout, ref, state_dir)
    urls = [
        str(m["clientURL"]) for m in _members(status) if m.get("clientURL") and m.get("role") != "learner"
    ]
    if not urls:
        why = status.get("message") or f"phase {status.get('phase', 'unknown')}"
        raise EnvError(f"{ref} has no members serving clients yet ({why})")
    exports = [f"ETCDCTL_ENDPOINTS={shlex.quote(','.join(urls))}"]
    if any(url.startswith("https://") for url in urls):
        exports += [f"{name}={shlex.quote(str(path))}" for name, path in _tls_files(layout, ref)]
        return "export " + " ".join(exports) + "\n"
    return "export " + " ".join(exports) + "\nunset " + " ".join(TLS_VARIABLES) + "\n"


def _read_status(layout: ClusterLayout, ref: ClusterRef, state_dir: Path) -> dict[str, Any]:
    try:
        status = json.loads(layout.status_file.read_text())
    except FileNotFoundError:
        known = sorted(f"{p.parent.parent.name}/{p.parent.name}" for p in state_dir.glob("*/*/status.json"))
        have = f"clusters there: {', '.join(known)}" if known else "no clusters there"
        raise EnvError(f"no cluster {ref} under {state_dir} ({have}); is --state-dir the daemon's?") from None
    except (OSError, ValueError) as exc:
        raise EnvError(f"cannot read {layout.status_file}: {exc}") from exc
    if not isinstance(status, dict):
        raise EnvError(f"{layout.status_file} is not a status object")
    return status


def _members(status: dict[str, Any]) -> list[dict[str, Any]]:
    members = status.get("members")
    return [m for m in members if isinstance(m, dict)] if isinstance(members, list) else []


def _tls_files(layout: ClusterLayout, ref: ClusterRef) -> list[tuple[str, Path]]:
    # The names the runtime gives the daemon's own client certificate (runtime.client_tls_files).
    files = [
        (var, layout.tls_dir / name)
        for var, name in zip(TLS_VARIABLES, ("ca.crt", "client.crt", "client.key"), strict=True)
    ]
    lost = [str(path) for _, path in files if not path.is_file()]
    if lost:
        raise EnvError(f"{ref} serves TLS but its client certificate is missing: {', '.join(lost)}")
    return files

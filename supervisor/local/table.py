"""The terminal view of local mode: a table of clusters and their members, redrawn as status changes."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

import trio

from actors.model import ClusterRef, ClusterStatus, Condition, MemberStatus

MEMBER_COLUMNS = ("MEMBER", "ROLE", "HEALTHY", "PID", "CLIENT URL", "ID")
CLEAR_AND_HOME = "\x1b[H\x1b[2J"


# The shell command that points etcdctl at a cluster (`local env`), shown under its members.
EnvCommand = Callable[[ClusterRef], str]


def render_status_table(
    statuses: Mapping[ClusterRef, ClusterStatus],
    *,
    width: int,
    problems: Sequence[str] = (),
    env_command: EnvCommand | None = None,
) -> str:
    """Problems of the manifest file first ("! ..."), then one block per cluster (sorted by
    namespace/name): a header line, a row per member, and the command for etcdctl.

    Lines never exceed width: long cells are cut with '…' so a narrow terminal stays readable.
    The etcdctl command is the exception: a wrapped line can still be copied, a cut one cannot.
    """
    head = [_clip(f"! {problem}", width) + "\n" for problem in problems]
    if not statuses:
        return "".join(head) + _clip("no clusters", width) + "\n"
    blocks = [_render_cluster(ref, statuses[ref], width, env_command) for ref in sorted(statuses)]
    return "".join(head) + "\n".join(blocks)


def _render_cluster(
    ref: ClusterRef, status: ClusterStatus, width: int, env_command: EnvCommand | None
) -> str:
    # Size is what the status knows: its member list (the spec is not part of ClusterStatus).
    header = f"{ref}  {status.phase.value}  ready {status.ready_replicas}/{len(status.members)}"
    if status.message:
        header += f"  {status.message}"
    lines = [_clip(header, width)]
    rows = [MEMBER_COLUMNS, *(_member_row(m) for m in status.members)]
    if status.members:
        lines += _columns(rows, width, indent="  ")
    else:
        lines.append(_clip("  (no members yet)", width))
    for condition in filter(_needs_attention, status.conditions):
        lines.append(_clip(f"  ! {condition.type}: {condition.reason} {condition.message}".rstrip(), width))
    if env_command is not None and status.members:
        lines.append(f"  etcdctl: {env_command(ref)}")
    return "\n".join(lines) + "\n"


def _member_row(member: MemberStatus) -> tuple[str, ...]:
    return (
        member.name,
        member.role.value,
        "yes" if member.healthy else "no",
        str(member.pid) if member.pid is not None else "-",
        member.client_url or "-",
        member.id or "-",
    )


def _columns(rows: Sequence[tuple[str, ...]], width: int, *, indent: str) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        _clip(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), width)
        for row in rows
    ]


def _clip(line: str, width: int) -> str:
    if width <= 0 or len(line) <= width:
        return line
    return line[: max(width - 1, 0)] + "…"


class StatusBoard:
    """Shows the latest statuses: redrawn in place on a terminal, printed as snapshots otherwise.

    update() is cheap and never blocks for long: it draws at most once per min_interval and
    leaves a newer state pending; run() (optional, in a nursery) draws that pending state when
    the interval has passed, so the screen never lags more than min_interval behind.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        min_interval: float = 0.25,
        tty: bool | None = None,
        env_command: EnvCommand | None = None,
    ) -> None:
        self._stream = stream if stream is not None else sys.stdout
        self._tty = self._stream.isatty() if tty is None else tty
        self._min_interval = min_interval
        self._statuses: dict[ClusterRef, ClusterStatus] = {}
        self._problems: list[str] = []
        self._env_command = env_command
        self._last_text: str | None = None
        self._last_draw = float("-inf")
        self._pending = False
        self._wakeup = trio.Event()

    def update(self, statuses: Mapping[ClusterRef, ClusterStatus]) -> None:
        self._statuses = dict(statuses)
        self._pending = True
        if time.monotonic() - self._last_draw >= self._min_interval:
            self.flush()
        else:
            self._wakeup.set()

    def show_problems(self, problems: Sequence[str]) -> None:
        """Lines about the manifest file as a whole, shown above the clusters until replaced."""
        self._problems = list(problems)
        self.update(self._statuses)

    def flush(self) -> None:
        """Draw the current state now if it differs from what is shown."""
        self._pending = False
        self._last_draw = time.monotonic()
        # A terminal's lines are cut to fit it; written elsewhere (a file, a pipe) they stay whole.
        width = shutil.get_terminal_size().columns if self._tty else 0
        text = render_status_table(
            self._statuses, width=width, problems=self._problems, env_command=self._env_command
        )
        if text == self._last_text:
            return
        self._last_text = text
        try:
            if self._tty:
                self._stream.write(CLEAR_AND_HOME + text)
            else:
                self._stream.write(f"--- {time.strftime('%H:%M:%S')}\n{text}")
            self._stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken stdout must not take the daemon down

    async def run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            await trio.sleep(max(0.0, self._last_draw + self._min_interval - time.monotonic()))
            if self._pending:
                self.flush()


# Conditions that say something good when True; the others (Degraded, Progressing, Upgrading)
# say something worth a look when True.
GOOD_WHEN_TRUE = frozenset({"Ready", "Available", "SpaceAvailable", "BackupHealthy"})


def _needs_attention(condition: Condition) -> bool:
    return (condition.status == "True") != (condition.type in GOOD_WHEN_TRUE)

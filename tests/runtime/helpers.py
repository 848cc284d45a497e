"""Shared test doubles: a scriptable child, a tiny actor, and a task counter."""

from __future__ import annotations

import functools
from typing import Any

import attrs
import trio

from supervisor.runtime import Actor, ChildSpec, Reply, Restart, open_cleanup_scope


class Boom(Exception):
    pass


def count_tasks() -> int:
    """Every task alive in this trio run, found by walking the task tree from the root."""

    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(child) for nursery in task.child_nurseries for child in nursery.child_tasks)

    root = trio.lowlevel.current_root_task()
    assert root is not None
    return walk(root)


class Probe:
    """Children whose life the test scripts: crash, exit normally, or linger when stopped.

    `events` records (time, what, child id) for start, stop (cancelled), crash, exit and
    cleaned (cleanup finished).
    """

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str]] = []
        self._kill: dict[str, trio.Event] = {}
        self._mode: dict[str, str] = {}
        self.cleanup: dict[str, float] = {}  # seconds of (shielded) cleanup on stop; inf = ignore stop
        self.fail_start: dict[str, int] = {}  # how many upcoming starts of this id raise before readiness

    def spec(self, id: str, *, restart: Restart = Restart.PERMANENT, shutdown: float = 5.0) -> ChildSpec:
        return ChildSpec(id, functools.partial(self._run, id), restart=restart, shutdown=shutdown)

    def of(self, what: str) -> list[tuple[float, str]]:
        return [(t, cid) for t, w, cid in self.events if w == what]

    def crash(self, id: str) -> None:
        self._mode[id] = "crash"
        self._kill[id].set()

    def exit(self, id: str) -> None:
        self._mode[id] = "exit"
        self._kill[id].set()

    async def _run(self, id: str, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        kill = trio.Event()
        self._kill[id] = kill
        self.events.append((trio.current_time(), "start", id))
        if self.fail_start.get(id, 0) > 0:
            self.fail_start[id] -= 1
            self.events.append((trio.current_time(), "crash", id))
            raise Boom(f"{id} failed to start")
        task_status.started()
        try:
            await kill.wait()
        except trio.Cancelled:
            self.events.append((trio.current_time(), "stop", id))
            with open_cleanup_scope():
                await trio.sleep(self.cleanup.get(id, 0))
            # Reached also when the supervisor cut the cleanup short.
            self.events.append((trio.current_time(), "cleaned", id))
            raise
        mode = self._mode.pop(id)
        self.events.append((trio.current_time(), mode, id))
        if mode == "crash":
            raise Boom(id)


@attrs.frozen
class Get:
    reply: Reply[int]


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Crash:
    pass


@attrs.frozen
class Hang:
    """Keeps the actor busy (handling) for `seconds`."""

    seconds: float


@attrs.frozen
class Ask:
    """A call the actor answers only after `seconds`, or crashes on (crash=True)."""

    reply: Reply[int]
    seconds: float = 0.0
    crash: bool = False
    fail: bool = False


Msg = Get | Add | Crash | Hang | Ask


class Counter(Actor[Msg]):
    """Sums Add messages; its state dies with it, which is how tests see a restart."""

    __slots__ = ("total",)

    def __init__(self) -> None:
        self.total = 0

    async def handle(self, msg: Msg) -> None:
        match msg:
            case Get(reply):
                reply.set(self.total)
            case Add(n):
                self.total += n
            case Crash():
                raise Boom("crash requested")
            case Hang(seconds):
                await trio.sleep(seconds)
            case Ask(reply, seconds, crash, fail):
                await trio.sleep(seconds)
                if crash:
                    raise Boom("crash while answering")
                if fail:
                    reply.fail(KeyError("no such thing"))
                else:
                    reply.set(self.total)

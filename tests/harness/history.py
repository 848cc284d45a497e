"""Client histories of an etcd cluster, and the porcupine check that they are linearizable.

A test runs a ``KvWorkload`` beside whatever it does to the cluster (kill members, restart
the daemon, defragment, upgrade) and asks the Go checker in ``tests/linearizability/``
whether what the clients saw could have come from one copy of the data::

    workload = KvWorkload(endpoints=list(cluster.endpoints))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(workload.run)
        await workload.wait_for_more(100)
        ...                                     # the faults; mutate workload.endpoints in place
        await workload.wait_for_more(100)       # the cluster serves again
        nursery.cancel_scope.cancel()           # in-flight puts are recorded as unknown
    result = await workload.check(tmp_path)     # history.json (+ an HTML picture on failure)
    assert result.ok, result.report

The workload needs the asyncio loop the etcd client runs on (``supervisor.aio.open_asyncio_loop``).
A history can also be written by hand (``History.record``) to test the checker itself.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from supervisor.etcd import EtcdClient, EtcdError
from tests.harness.components import MissingComponent, require

if TYPE_CHECKING:
    from supervisor.etcd import TlsFiles

PUT, GET = "put", "get"
# A put that raised may or may not have been applied: etcd can commit it after the client
# gave up, or answer on a connection that then died. A failed get observed nothing.
OK, FAILED, UNKNOWN = "ok", "failed", "unknown"

CHECKER_BUILD = Path(__file__).resolve().parents[1] / "linearizability" / "build.sh"


@attrs.frozen
class Operation:
    client: int
    kind: str  # PUT or GET
    key: str
    value: str | None  # put: the value written; get: the value observed (None: absent)
    call: int  # time.monotonic_ns() before the request
    returned: int  # time.monotonic_ns() after the answer (or the error)
    outcome: str  # OK, FAILED or UNKNOWN
    error: str | None = None  # what the client raised, for a reader of a failed test (not checked)

    def as_json(self) -> dict[str, object]:
        return {
            "client": self.client,
            "kind": self.kind,
            "key": self.key,
            "value": self.value,
            "call": self.call,
            "return": self.returned,
            "outcome": self.outcome,
        }


@attrs.define
class History:
    operations: list[Operation] = attrs.field(factory=list)

    def record(self, operation: Operation) -> None:
        self.operations.append(operation)

    def count(self, *, kind: str | None = None, outcome: str | None = None) -> int:
        return sum(
            1
            for op in self.operations
            if (kind is None or op.kind == kind) and (outcome is None or op.outcome == outcome)
        )

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps({"operations": [op.as_json() for op in self.operations]}))
        return path


# ---- the checker


@attrs.frozen
class CheckResult:
    ok: bool  # the checker found a linearization
    operations: int  # how many operations it checked (failed gets are dropped before)
    seconds: float  # the checker's own run time, start to exit
    report: str  # its output, for assertion messages
    history: Path
    visualization: Path | None  # porcupine's HTML picture of a failure


def find_checker() -> Path:
    """The checker binary, built from tests/linearizability/ once (needs Go the first time)."""
    try:
        built = subprocess.run([str(CHECKER_BUILD)], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingComponent(f"linearizability checker: {CHECKER_BUILD} did not run: {exc}") from exc
    if built.returncode != 0:
        tail = " ".join(built.stderr.strip().splitlines()[-3:])
        raise MissingComponent(f"linearizability checker not built (`make linearizability`): {tail}")
    return Path(built.stdout.strip())


def checker_or_skip() -> Path:
    return require("linearizability checker", find_checker)


def check_history(history: History, directory: Path, *, timeout: float = 120.0) -> CheckResult:
    """Write the history into ``directory`` and run porcupine on it (skips if no checker)."""
    checker = checker_or_skip()
    directory.mkdir(parents=True, exist_ok=True)
    path = history.write(directory / "history.json")
    picture = directory / "linearizability.html"
    started = time.monotonic()
    run = subprocess.run(
        [str(checker), f"-visualize={picture}", f"-timeout={timeout}s", str(path)],
        capture_output=True,
        text=True,
        timeout=timeout + 30,
    )
    seconds = time.monotonic() - started
    report = (run.stdout + run.stderr).strip()
    if run.returncode not in (0, 1):
        raise RuntimeError(f"the linearizability checker could not decide ({run.returncode}): {report}")
    checked = re.search(r"(\d+) operations checked", report)
    if checked is None:
        raise RuntimeError(f"unexpected checker output: {report}")
    return CheckResult(
        ok=run.returncode == 0,
        operations=int(checked.group(1)),
        seconds=seconds,
        report=report,
        history=path,
        visualization=picture if picture.exists() else None,
    )


# ---- the workload


@attrs.define
class KvWorkload:
    """Concurrent clients doing puts of unique values and linearizable gets on a few keys.

    Each client talks to one endpoint at a time and moves to the next after an error, with a
    client of the project's own that has only that endpoint: a call is then one attempt,
    whose outcome the history states honestly. (The multi-endpoint client retries a put on
    the next endpoint after a timeout, which can apply it twice.)

    ``endpoints`` is read before every operation: mutate the list in place to follow
    membership changes. The keys live under a prefix of their own, so they start absent.
    """

    endpoints: list[str]
    clients: int = 4
    keys: int = 3
    # Bounds the checker's work (20 000 operations: about half a second); run() returns there.
    max_operations: int = 20_000
    call_timeout: float = 2.0
    pause: float = 0.005  # between one client's operations: the machine is shared
    tls: TlsFiles | None = None
    prefix: str = attrs.field(factory=lambda: f"/linearizability/{uuid.uuid4().hex[:8]}/")
    history: History = attrs.field(factory=History)
    _ok: int = 0
    _progress: trio.Event = attrs.field(factory=trio.Event)
    _finished: bool = False
    # What ended run() other than a cancellation: a waiter that sees no progress names it.
    crashed: Exception | None = None

    @property
    def acknowledged(self) -> int:
        """Operations that succeeded so far (puts acknowledged, gets answered)."""
        return self._ok

    async def run(self, *, duration: float | None = None) -> History:
        """Until cancelled, ``duration`` seconds have passed, or ``max_operations`` are recorded."""
        try:
            with trio.move_on_after(float("inf") if duration is None else duration):
                async with trio.open_nursery() as nursery:
                    for client in range(self.clients):
                        nursery.start_soon(self._client, client)
        except Exception as exc:
            self.crashed = exc
            raise
        finally:
            self._finished = True
            self._progress.set()
        return self.history

    async def wait_for_more(self, count: int = 20, *, timeout: float = 30.0) -> None:
        """Until ``count`` more operations succeed: the cluster serves reads and writes again."""
        target = self._ok + count
        with trio.fail_after(timeout):
            while self._ok < target:
                if self._finished:
                    raise RuntimeError(
                        f"the workload stopped after {len(self.history.operations)} operations "
                        f"(max_operations={self.max_operations}, its duration, or {self.crashed!r})"
                    )
                await self._progress.wait()

    async def read_back(self) -> bool:
        """Every key read once more by a client of its own, after the others stopped; whether
        every read was answered. Recorded like any get, so the checker fails a history whose
        last acknowledged put of a key is gone (a put no later get read is otherwise unchecked)."""
        etcd = EtcdClient(list(self.endpoints), tls=self.tls, call_timeout=self.call_timeout)
        try:
            answered = [
                await self._operate(etcd, self.clients, GET, key, None)
                for key in map(self._key, range(self.keys))
            ]
        finally:
            with trio.CancelScope(shield=True):
                await etcd.aclose()
        return all(answered)

    def _key(self, number: int) -> str:
        return f"{self.prefix}{number}"

    async def check(self, directory: Path, *, timeout: float = 120.0) -> CheckResult:
        """The porcupine verdict on everything recorded so far (see ``check_history``)."""
        return await trio.to_thread.run_sync(lambda: check_history(self.history, directory, timeout=timeout))

    async def _client(self, client: int) -> None:
        rng = random.Random(f"{self.prefix}{client}")
        connections: dict[str, EtcdClient] = {}
        turn = client  # spread the clients over the endpoints
        try:
            for n in range(self.max_operations):
                if len(self.history.operations) >= self.max_operations:
                    return
                endpoints = list(self.endpoints)
                if not endpoints:  # no member is Ready yet, or none of the old ones is left
                    await trio.sleep(0.1)
                    continue
                url = endpoints[turn % len(endpoints)]
                etcd = connections.get(url)
                if etcd is None:
                    etcd = connections[url] = EtcdClient([url], tls=self.tls, call_timeout=self.call_timeout)
                key = self._key(rng.randrange(self.keys))
                if rng.random() < 0.5:
                    succeeded = await self._operate(etcd, client, PUT, key, f"{client}-{n}")
                else:
                    succeeded = await self._operate(etcd, client, GET, key, None)
                if not succeeded:
                    turn += 1
                await trio.sleep(self.pause)
        finally:
            with trio.CancelScope(shield=True):
                for etcd in connections.values():
                    await etcd.aclose()

    async def _operate(self, etcd: EtcdClient, client: int, kind: str, key: str, value: str | None) -> bool:
        outcome = UNKNOWN if kind == PUT else FAILED
        error: str | None = None
        started = time.monotonic_ns()
        try:
            if kind == PUT:
                assert value is not None
                await etcd.put(key.encode(), value.encode())
            else:
                found = await etcd.get(key.encode())  # a linearizable range, not serializable
                value = None if found is None else found.decode()
            outcome = OK
        except EtcdError as exc:
            error = f"{type(exc).__name__}: {exc}"
        finally:
            # Recorded even when cancelled: a put cut short may have been applied, and another
            # client may already have read its value.
            returned = time.monotonic_ns()
            self.history.record(Operation(client, kind, key, value, started, returned, outcome, error))
            if outcome == OK:
                self._ok += 1
                self._progress.set()
                self._progress = trio.Event()
        return outcome == OK


async def write_past_snapshots(
    urls: list[str], tls: TlsFiles | None, writes: int = 12_000, writers: int = 32
) -> None:
    """`writes` puts of 100 bytes over 100 keys, `writers` at a time: past etcd 3.6's snapshot
    count (10000), so the leader's log is compacted and a member added later is sent a snapshot."""
    etcd = EtcdClient(urls, tls=tls)
    left = iter(range(writes))

    async def writer() -> None:
        for n in left:
            await etcd.put(f"history/{n % 100}".encode(), b"x" * 100)

    try:
        async with trio.open_nursery() as nursery:
            for _ in range(writers):
                nursery.start_soon(writer)
    finally:
        await etcd.aclose()

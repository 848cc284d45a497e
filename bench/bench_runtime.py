"""Runtime micro-benchmarks: mailbox throughput, spawn+stop cost, memory per idle actor.

Run: .venv/bin/python bench/bench_runtime.py  (prints a summary, writes bench/results/runtime.json)
Targets: >= 100,000 msg/s through one mailbox; 10,000 idle actors under 100 MB RSS.
"""

from __future__ import annotations

import gc
import json
import logging
import statistics
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import write_result
from supervisor.runtime import Actor, Reply, Supervisor, actor_child


class Sink(Actor[object]):
    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    async def handle(self, msg: object) -> None:
        if isinstance(msg, Reply):
            msg.set(self.count)
        else:
            self.count += 1


def rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


async def throughput(messages: int, *, nowait: bool = False) -> float:
    spec, handle = actor_child("sink", Sink, mailbox_capacity=256)
    sup = Supervisor("bench", [spec])
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        start = time.perf_counter()
        if nowait:
            # A producer that pushes while there is room and waits only when full (how a watch
            # pump feeds an actor): no scheduler round-trip per message on the sending side.
            for i in range(messages):
                try:
                    handle.send_nowait(i)
                except trio.WouldBlock:
                    await handle.send(i)
        else:
            for i in range(messages):
                await handle.send(i)
        handled = await handle.call(lambda reply: reply, timeout=60)
        elapsed = time.perf_counter() - start
        assert handled == messages, handled
        nursery.cancel_scope.cancel()
    return messages / elapsed


async def spawn_stop(iterations: int) -> float:
    sup = Supervisor("bench")
    samples = []
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        for i in range(iterations):
            spec, _ = actor_child(f"a{i}", Sink)
            start = time.perf_counter()
            await sup.add_child(spec)
            await sup.remove_child(spec.id)
            samples.append(time.perf_counter() - start)
        nursery.cancel_scope.cancel()
    return statistics.median(samples) * 1e6


async def idle_actors(count: int) -> tuple[float, float]:
    gc.collect()
    before = rss_kb()
    specs = []
    for i in range(count):
        spec, _ = actor_child(f"a{i}", Sink, mailbox_capacity=64)
        specs.append(spec)
    sup = Supervisor("bench", specs)
    async with trio.open_nursery() as nursery:
        await nursery.start(sup.run)
        assert sum(c.running for c in sup.statistics().children) == count
        gc.collect()
        delta_kb = rss_kb() - before
        nursery.cancel_scope.cancel()
    return delta_kb / 1024, delta_kb / count


async def main() -> dict[str, object]:
    runs = [await throughput(200_000) for _ in range(5)]
    nowait_runs = [await throughput(200_000, nowait=True) for _ in range(5)]
    spawn_us = await spawn_stop(2_000)
    total_mb, kb_per_actor = await idle_actors(10_000)
    return {
        "python": sys.version.split()[0],
        "trio": trio.__version__,
        "mailbox_throughput_msgs_per_s": round(statistics.median(runs)),
        "mailbox_throughput_runs": [round(r) for r in runs],
        "mailbox_throughput_send_nowait_msgs_per_s": round(statistics.median(nowait_runs)),
        "mailbox_throughput_send_nowait_runs": [round(r) for r in nowait_runs],
        "spawn_stop_median_us": round(spawn_us, 1),
        "idle_actors": 10_000,
        "idle_actors_rss_mb": round(total_mb, 1),
        "idle_actor_rss_kb": round(kb_per_actor, 2),
        "targets_met": {
            "throughput_100k_awaiting_send": statistics.median(runs) >= 100_000,
            "throughput_100k_send_nowait": statistics.median(nowait_runs) >= 100_000,
            "10k_actors_under_100mb": total_mb < 100,
        },
    }


if __name__ == "__main__":
    logging.disable(logging.INFO)  # a start log line per actor would measure logging, not the runtime
    result = trio.run(main)
    write_result("runtime", result)
    print(json.dumps(result, indent=2))

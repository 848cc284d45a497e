"""Client latency while certificates change, on the local runtime with real etcd processes.

Per run, one 3-member TLS cluster under a steady workload (4 clients of puts and linearizable
gets through the project's multi-endpoint client, which reads the CA bundle again when it
reconnects), with leaves living 40 s and renewed with 25 s left (a renewal every ~15 s), then a
CA rotation asked for with etcd.io/rotate-ca. Prints medians over the runs and writes
bench/results/rotation.json:
- p99 latency of requests started within [-0.5 s, +2 s] of a leaf renewal, against the p99 of
  the same run's requests away from any renewal or rotation (target: at most 1.5x);
- p99 latency of requests during the CA rotation (the annotation to CARotated: three rolling
  restarts), against the same baseline (target: at most 3x);
- requests that failed (raised to the caller) during each (target: 0).
Figures depend on the machine and its load (a 2-core machine shared with other work): compare
the ratios, which come from the same run.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import attrs
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.cluster_context import Timing
from actors.model import CertificatesSpec, ClusterRef, ClusterResource, ClusterSpec
from bench.report import run_in_fresh_dirs, write_result
from supervisor.etcd.client import open_etcd_client
from supervisor.etcd.tls import TlsFiles
from supervisor.local.embedded import LocalSupervisor, is_healthy, open_local_supervisor

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
CLIENTS = 4
RENEWALS = 3
DAEMON_TIMING = Timing()  # what `etcd-supervisor local` uses
SHORT = CertificatesSpec(validity="40s", renew_before="25s")
DEMO = ClusterResource(
    ClusterRef("default", "demo"), ClusterSpec(size=3, tls_enabled=True, certificates=SHORT)
)


@attrs.define
class Requests:
    """(start, seconds, failed) of every request the clients made."""

    urls: list[str]
    tls: TlsFiles
    done: list[tuple[float, float, bool]] = attrs.field(factory=list)

    async def run(self) -> None:
        async with (
            open_etcd_client(self.urls, tls=self.tls, call_timeout=2.0) as etcd,
            trio.open_nursery() as nursery,
        ):
            for client in range(CLIENTS):
                nursery.start_soon(self._client, etcd, client)

    async def _client(self, etcd, client: int) -> None:  # type: ignore[no-untyped-def]
        n = 0
        while True:
            n += 1
            start = time.monotonic()
            failed = False
            try:
                if n % 2:
                    await etcd.put(f"bench/{client}".encode(), str(n).encode())
                else:
                    await etcd.get(f"bench/{client}".encode())
            except Exception:
                failed = True
            self.done.append((start, time.monotonic() - start, failed))
            await trio.sleep(0.005)


@attrs.define
class EventClock:
    """When each of the cluster's Events appeared (monotonic seconds), looked at every 50 ms."""

    sup: LocalSupervisor
    seen: list[tuple[str, float]] = attrs.field(factory=list)
    more: trio.Event = attrs.field(factory=trio.Event)

    async def run(self) -> None:
        count = 0
        while True:
            events = [reason for ref, reason, _ in self.sup.recorder.events if ref == DEMO.ref]
            if len(events) > count:
                self.seen += [(reason, time.monotonic()) for reason in events[count:]]
                count = len(events)
                self.more.set()
                self.more = trio.Event()
            await trio.sleep(0.05)

    def times(self, reason: str) -> list[float]:
        return [at for found, at in self.seen if found == reason]


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")


async def wait_event(clock: EventClock, reason: str, count: int) -> None:
    while len(clock.times(reason)) < count:
        await clock.more.wait()


async def one_run(workdir: Path) -> dict[str, float]:
    async with open_local_supervisor(workdir, timing=DAEMON_TIMING) as sup:
        await sup.fleet.apply([DEMO])
        with trio.fail_after(120):
            status = await sup.wait_for(DEMO.ref, lambda s: is_healthy(s, 3) and s.tls is not None)
        requests = Requests([m.client_url for m in status.members], sup.runtime.client_tls_files(DEMO.ref))
        clock = EventClock(sup)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(clock.run)
            nursery.start_soon(requests.run)
            with trio.fail_after(120):
                await wait_event(clock, "CertificatesRenewed", RENEWALS)
            rotation_start = time.monotonic()
            await sup.fleet.apply([attrs.evolve(DEMO, rotate_ca="bench")])
            with trio.fail_after(300):
                await wait_event(clock, "CARotated", 1)
            rotation_end = time.monotonic()
            await trio.sleep(2)
            nursery.cancel_scope.cancel()
        renewals = [t for t in clock.times("CertificatesRenewed") if t < rotation_start]

    def near_renewal(start: float) -> bool:
        return any(t - 0.5 <= start <= t + 2.0 for t in renewals)

    during_rotation = [r for r in requests.done if rotation_start <= r[0] <= rotation_end]
    around_renewals = [r for r in requests.done if r[0] < rotation_start and near_renewal(r[0])]
    apart = [r for r in requests.done if r[0] < rotation_start and not near_renewal(r[0])]
    base = p99([seconds for _, seconds, failed in apart if not failed])
    return {
        "p99_baseline_ms": base * 1000,
        "p99_renewal_ms": p99([s for _, s, failed in around_renewals if not failed]) * 1000,
        "p99_ca_rotation_ms": p99([s for _, s, failed in during_rotation if not failed]) * 1000,
        "renewal_over_baseline": p99([s for _, s, f in around_renewals if not f]) / base,
        "ca_rotation_over_baseline": p99([s for _, s, f in during_rotation if not f]) / base,
        "failed_around_renewals": float(sum(f for *_, f in around_renewals)),
        "failed_during_ca_rotation": float(sum(f for *_, f in during_rotation)),
        "ca_rotation_s": rotation_end - rotation_start,
        "requests": float(len(requests.done)),
    }


def main() -> None:
    runs, medians = run_in_fresh_dirs(one_run, RUNS)
    write_result("rotation", {"runs": RUNS, "samples": runs, "medians": medians})
    print(f"certificate rotation, median [range] of {RUNS} runs ({os.cpu_count()} cores, shared and noisy)")
    for key, values in runs.items():
        print(f"  {key:<28} {medians[key]:10.2f}  [{min(values):.2f}..{max(values):.2f}]")
    print("  targets: renewal_over_baseline <= 1.5, ca_rotation_over_baseline <= 3, failed 0")


if __name__ == "__main__":
    main()

"""etcd auth (spec.security.auth) costs on the local runtime, with real etcd processes over TLS:

- request latency with auth on ÷ off: one client doing sequential puts and linearizable gets on
  a 3-member cluster, first with auth off (the supervisor's certificate), then, on the same
  cluster in the same run, with auth on (a tenant's certificate, its role reaching the keys);
  medians per operation, and their ratio (etcd's own cost of checking permissions);
- reconcile time for BENCH_AUTH_USERS (100) users and as many roles: the spec applied to the
  AuthReconciled Event that names the last user.

Prints medians over BENCH_RUNS (3) runs and writes bench/results/auth.json. Figures depend on
the machine and its load (2 shared cores here): compare the ratio.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.cluster_context import Timing
from actors.model import (
    AuthSpec,
    ClusterRef,
    ClusterResource,
    ClusterSpec,
    Permission,
    PermissionType,
    RoleSpec,
    UserSpec,
)
from bench.report import median_line, run_in_fresh_dirs, write_result
from supervisor.etcd import TlsFiles, open_etcd_client
from supervisor.local.embedded import LocalSupervisor, is_healthy, open_local_supervisor

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
USERS = int(os.environ.get("BENCH_AUTH_USERS", "100"))
OPERATIONS = 1000
REF = ClusterRef("default", "demo")
TENANT = UserSpec("tenant", ("tenant",), client_cert_secret="tenant")
TENANT_ROLE = RoleSpec("tenant", (Permission(PermissionType.READWRITE, "/bench/", prefix=True),))


def cluster(auth: AuthSpec, generation: int) -> ClusterResource:
    return ClusterResource(REF, ClusterSpec(size=3, auth=auth), generation)


async def latency(urls: list[str], tls: TlsFiles) -> float:
    """Median seconds of one put or get, OPERATIONS of them in turn."""
    took = []
    async with open_etcd_client(urls, tls=tls, call_timeout=5) as etcd:
        for n in range(OPERATIONS):
            start = time.perf_counter()
            if n % 2:
                await etcd.get(b"/bench/k")
            else:
                await etcd.put(b"/bench/k", str(n).encode())
            took.append(time.perf_counter() - start)
    return statistics.median(took)


async def reconciled(sup: LocalSupervisor, words: str) -> None:
    def found(_: object) -> bool:
        return any(reason == "AuthReconciled" and words in m for _, reason, m in sup.recorder.events)

    with trio.fail_after(600):
        await sup.wait_for(REF, found)


async def one_run(workdir: Path) -> dict[str, float]:
    async with open_local_supervisor(workdir / "state", timing=Timing()) as sup:
        await sup.fleet.apply([cluster(AuthSpec(users=(TENANT,), roles=(TENANT_ROLE,)), 1)])
        status = await sup.wait_for(REF, lambda s: is_healthy(s, 3))
        await reconciled(sup, "issued to tenant")
        urls = [m.client_url for m in status.members]
        own = sup.runtime.client_tls_files(REF)
        users_dir = sup.runtime.layout.cluster(REF).root / "users" / "tenant"
        tenant = TlsFiles(users_dir / "ca.crt", users_dir / "tls.crt", users_dir / "tls.key")
        off = await latency(urls, own)
        await sup.fleet.apply([cluster(AuthSpec(enabled=True, users=(TENANT,), roles=(TENANT_ROLE,)), 2)])
        await reconciled(sup, "enable auth")
        on = await latency(urls, tenant)

        roles = tuple(
            RoleSpec(f"r{i}", (Permission(PermissionType.READ, f"/t{i}/", prefix=True),))
            for i in range(USERS)
        )
        users = tuple(UserSpec(f"u{i}", (f"r{i}",)) for i in range(USERS))
        many = AuthSpec(enabled=True, users=(TENANT, *users), roles=(TENANT_ROLE, *roles))
        start = time.monotonic()
        await sup.fleet.apply([cluster(many, 3)])
        await reconciled(sup, f"add user u{USERS - 1}")
        reconcile = time.monotonic() - start
    return {"op_auth_off_s": off, "op_auth_on_s": on, "reconcile_s": reconcile}


def main() -> None:
    runs, medians = run_in_fresh_dirs(one_run, RUNS)
    ratio = medians["op_auth_on_s"] / medians["op_auth_off_s"]
    write_result(
        "auth", {"runs": RUNS, "users": USERS, "samples": runs, "medians": medians, "on_over_off": ratio}
    )
    print(
        f"etcd auth, 3 members over TLS, median [range] of {RUNS} runs"
        f" ({os.cpu_count()} cores, shared and noisy)"
    )
    for label, key, note in (
        ("one request, auth off", "op_auth_off_s", ""),
        ("one request, auth on (a tenant)", "op_auth_on_s", f"{ratio:.2f}x auth off"),
    ):
        ms = [v * 1000 for v in runs[key]]
        print(f"  {label:<44} {statistics.median(ms):6.2f} ms [{min(ms):.2f}..{max(ms):.2f}] {note}")
    print(median_line(f"reconcile {USERS} users and {USERS} roles", runs["reconcile_s"], width=44))


if __name__ == "__main__":
    main()

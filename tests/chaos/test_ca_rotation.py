"""A CA rotation on real etcd, locally, under a checked workload, with the supervisor stopped in
the middle of it and a new one taking it up.

The supervisor is cancelled wherever it is when the rotation has reached its second phase (a
member may be stopped and not yet started again, a step cut short): etcd keeps serving, and the
next supervisor adopts the members and finds the phase in the store and the members' digests.
Clients read the CA bundle file again when they reconnect (supervisor/etcd/tls.py), as the
workload's clients here do.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import trio
from cryptography import x509

from actors.model import ClusterRef, ClusterResource, ClusterSpec, ClusterStatus, RotationKind
from supervisor import ca_material, pki
from supervisor.aio import open_asyncio_loop
from tests.chaos.lifecycle import LocalSupervisor, is_healthy, open_local_supervisor
from tests.harness.history import KvWorkload
from tests.harness.procs import etcd_pids_under

DEMO = ClusterResource(ClusterRef("default", "demo"), ClusterSpec(size=3, tls_enabled=True))


def reasons(sup: LocalSupervisor) -> list[str]:
    return [reason for ref, reason, _ in sup.recorder.events if ref == DEMO.ref]


async def wait_for_event(sup: LocalSupervisor, reason: str, timeout: float) -> None:
    with trio.fail_after(timeout):
        while reason not in reasons(sup):
            await trio.sleep(0.1)


def rotated_ca(status: ClusterStatus) -> bool:
    """status.tls says the last rotation was of the CA."""
    rotation = status.tls.last_rotation if status.tls is not None else None
    return rotation is not None and rotation.kind is RotationKind.CA


def bundle(state_dir: Path) -> list[x509.Certificate]:
    return pki.load_bundle((state_dir / "default" / "demo" / "tls" / ca_material.CA_CERT).read_bytes())


def leaves(state_dir: Path) -> list[x509.Certificate]:
    root = state_dir / "default" / "demo"
    paths = [root / "tls" / "client.crt", *sorted(root.glob("members/*/tls/member.crt"))]
    return [x509.load_pem_x509_certificate(p.read_bytes()) for p in paths]


async def test_a_ca_rotation_under_load_is_taken_up_by_the_next_supervisor_and_ends_trusting_only_the_new_ca(
    tmp_path: Path,
) -> None:
    requested = attrs.evolve(DEMO, rotate_ca="2026-11-27")
    started: list[KvWorkload] = []
    ready = trio.Event()

    async def run_workload() -> None:
        # Spawned before either supervisor, on the test's own asyncio loop: the clients live
        # on while the first supervisor (and the loop it opens) goes away.
        await ready.wait()
        await started[0].run()

    async with open_asyncio_loop(), trio.open_nursery() as outer:
        outer.start_soon(run_workload)
        async with open_local_supervisor(tmp_path, leave_members_running=True) as sup:
            await sup.fleet.apply([DEMO])
            status = await sup.wait_healthy(DEMO.ref, 3)
            (old_ca,) = bundle(tmp_path)
            workload = KvWorkload(
                endpoints=[m.client_url for m in status.members],
                max_operations=100_000,
                tls=sup.runtime.client_tls_files(DEMO.ref),
            )
            started.append(workload)
            ready.set()
            await workload.wait_for_more(50)
            await sup.fleet.apply([requested])
            # Stopped once the new CA signs: half the rotation done, half to do.
            await wait_for_event(sup, "CARotationSwitched", timeout=120)
            assert "CARotated" not in reasons(sup)
        await workload.wait_for_more(20)  # etcd served on while no supervisor ran

        async with open_local_supervisor(tmp_path) as sup:
            await sup.fleet.apply([requested])
            await wait_for_event(sup, "CARotated", timeout=180)
            # The Event is recorded before the status that says so is published: wait for both.
            status = await sup.wait_for(DEMO.ref, lambda s: is_healthy(s, 3) and rotated_ca(s), timeout=60)
            await workload.wait_for_more(50)
            outer.cancel_scope.cancel()

    # Only the new CA is trusted, and it signed every leaf.
    (new_ca,) = bundle(tmp_path)
    assert new_ca != old_ca
    assert all(pki.signed_by(leaf, new_ca) for leaf in leaves(tmp_path))
    assert status.tls.ca_not_after == new_ca.not_valid_after_utc.timestamp()
    # Nothing acknowledged lost, nothing seen out of order.
    verdict = await workload.check(tmp_path / "history")
    assert verdict.ok, verdict.report
    operations = workload.history.operations
    failed = [op for op in operations if op.error is not None]
    print(f"operations: {len(operations)}, failed (members restarting): {len(failed)}")
    assert etcd_pids_under(tmp_path) == []

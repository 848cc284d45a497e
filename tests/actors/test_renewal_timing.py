"""The renewal child on the autojump clock with certificates held in memory: when it renews,
what it reports when renewal is refused, and that it recovers once renewal works again."""

from __future__ import annotations

import attrs
import trio

from actors.certificates import Certificate, CertificateState
from actors.errors import CertificatesRefused
from actors.model import CertificatesSpec, ClusterRef, ClusterResource, ClusterSpec
from actors.platform import open_supervisor
from actors.renewal import renewal_child
from tests.actors.world import REF, TIMING, MemoryWorld, platform

BASE = 1_900_000_000.0  # wall time at the virtual clock's zero
SPEC = ClusterSpec(
    size=3, tls_enabled=True, certificates=CertificatesSpec(validity="40s", renew_before="25s")
)


def now() -> float:
    return BASE + trio.current_time()


@attrs.define
class MemoryCertificates:
    """A CertificateStore in memory: a CA and two leaves, renewals recorded, refusals on demand."""

    leaves: dict[str, float] = attrs.field(factory=dict)  # name -> notAfter
    renewed: list[tuple[float, tuple[str, ...]]] = attrs.field(factory=list)
    refuse: bool = False

    async def read(self, cluster: ClusterRef) -> CertificateState | None:
        if not self.leaves:
            self.leaves = {"client": now() + 40, "demo-0": now() + 42}
        ca = Certificate("ca", BASE - 10, BASE + 10 * 365 * 86400)
        return CertificateState(ca, tuple(Certificate(n, BASE, t) for n, t in sorted(self.leaves.items())))

    async def renew(self, cluster: ClusterRef, names, lifetime: float) -> None:
        if self.refuse:
            raise CertificatesRefused("tls/ is read-only")
        for name in names:
            self.leaves[name] = now() + lifetime
        self.renewed.append((trio.current_time(), tuple(names)))


def certificates_valid(world: MemoryWorld) -> list[tuple[float, str]]:
    """(when, reason) each time CertificatesValid changed in the published statuses."""
    out: list[tuple[float, str]] = []
    for at, status in world.statuses:
        found = {c.type: c for c in status.conditions}.get("CertificatesValid")
        if found is not None and (not out or out[-1][1] != found.reason):
            out.append((at, found.reason))
    return out


async def test_leaves_are_renewed_in_step_and_a_refusal_is_reported_then_healed(autojump_clock) -> None:
    world, store = MemoryWorld(), MemoryCertificates()
    # The child as Platform.services builds it, on the virtual clock's wall time.
    async with open_supervisor(
        platform(world), timing=TIMING, children=[renewal_child(store, clock=now)]
    ) as fleet:
        await fleet.apply([ClusterResource(REF, SPEC)])
        await trio.sleep(50)
        # Due 15 s after issue (25 s left of 40): the client at 15 s takes demo-0 (due 2 s
        # later) along; then both every 15 s, together.
        assert [names for _, names in store.renewed] == [("client", "demo-0")] * 3, (store, world.events[-5:])
        assert [round(at) for at, _ in store.renewed] == [15, 30, 45]
        assert [r for _, r, _ in world.events if r == "CertificatesRenewed"] == ["CertificatesRenewed"] * 3
        assert world.statuses[-1][1].tls is not None and world.statuses[-1][1].tls.last_rotation is not None

        store.refuse = True
        await trio.sleep(20)  # due at 60 s: refused, tried again every 5 s
        refused = len(store.renewed)
        store.refuse = False
        await trio.sleep(10)
        assert refused == 3 and len(store.renewed) == 4
        failed = [m for _, r, m in world.events if r == "CertificatesRenewalFailed"]
        assert failed == ["tls/ is read-only"]  # one Event for the four refused tries
    # (The condition is judged at the real wall clock, which the virtual one does not move: an
    # expiry shows in tests/unit/test_certificates.py and on real etcd in tests/chaos.)
    reasons = [reason for _, reason in certificates_valid(world)]
    assert reasons == ["Valid", "RenewalFailed", "Valid"], certificates_valid(world)
    failed_at = certificates_valid(world)[1][0]
    assert 60 <= failed_at <= 62

"""The renewal child: a per-cluster actor that keeps a TLS cluster's leaf certificates valid.

It reads the cluster's certificates through the platform's `CertificateStore`, renews the leaves
actors/certificates.py says are due (with the spec's validity), records a `CertificatesRenewed`
Event per renewal (a warning `CertificatesRenewalFailed` when the store refuses, once per
streak), and reports what it read in `ServiceReports.tls` for status.tls and the
CertificatesValid condition. It sleeps until the earliest leaf is due (at most a minute), so a
supervisor that was down longer than a leaf's life renews it as soon as the cluster starts.
Nothing restarts: etcd reads its key pair at each TLS handshake, and the store swaps the files
whole.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import trio

from actors.certificates import Certificate, TlsReport, due, seconds_until_due
from actors.cluster_context import ChildFactory, ClusterContext, ServicesReported, nudge
from actors.errors import CertificatesRefused
from actors.model import LastRotation, RotationKind
from actors.ports import CertificateStore
from supervisor.runtime import ChildSpec

# While a cluster has no certificates yet (being created) or TLS off: look again this often.
IDLE_LOOK = 5.0
# After a refused renewal: try again this soon (the leaf may be close to expiry).
RETRY_AFTER = 5.0


class Renewal:
    def __init__(self, context: ClusterContext, store: CertificateStore, clock: Callable[[], float]) -> None:
        self._context = context
        self._store = store
        self._clock = clock  # wall time: certificates' dates are wall time
        self._last_rotation: LastRotation | None = None

    async def run(self) -> None:
        while True:  # noqa: ASYNC110 - a timer: it waits for the clock, not for an event
            await trio.sleep(await self.once())

    async def once(self) -> float:
        """One look (and renewal when due); the seconds to sleep before the next."""
        spec = self._context.desired().resource.spec
        if not spec.tls_enabled:
            return IDLE_LOOK
        state = await self._store.read(self._context.ref)
        if state is None:
            return IDLE_LOOK
        names = due(state, spec.certificates, self._clock())
        failure = ""
        if names:
            try:
                await self._store.renew(self._context.ref, names, spec.certificates.validity_seconds)
            except CertificatesRefused as e:
                failure = str(e)
                await self._refused(failure)
            else:
                self._last_rotation = LastRotation(RotationKind.LEAF, self._clock())
                state = await self._store.read(self._context.ref) or state
                await self._renewed(names, state.earliest_leaf())
        self._report(TlsReport(state, failure, self._last_rotation))
        if failure:
            return RETRY_AFTER
        return max(seconds_until_due(state, spec.certificates, self._clock()), 1.0)

    async def _renewed(self, names: tuple[str, ...], earliest: Certificate | None) -> None:
        until = earliest.not_after if earliest else self._clock()
        when = datetime.fromtimestamp(until, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        await self._context.ports.events.record(
            self._context.ref,
            reason="CertificatesRenewed",
            message=f"renewed {', '.join(names)} with the same CA; the earliest leaf now expires {when}",
        )

    async def _refused(self, failure: str) -> None:
        # One warning Event per streak of refusals (retried every RETRY_AFTER), not one per try.
        previous = self._context.reports.tls
        if previous is None or not previous.failure:
            await self._context.ports.events.record(
                self._context.ref, reason="CertificatesRenewalFailed", message=failure, warning=True
            )

    def _report(self, report: TlsReport) -> None:
        reports = self._context.reports
        if reports.tls != report:
            reports.tls = report
            nudge(self._context.handle, ServicesReported())


def renewal_child(store: CertificateStore, *, clock: Callable[[], float] = time.time) -> ChildFactory:
    """The per-cluster child that renews the cluster's leaves through `store`."""

    def child(context: ClusterContext) -> ChildSpec:
        async def start(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            task_status.started()
            await Renewal(context, store, clock).run()

        return ChildSpec("certificates", start, shutdown=2.0)

    return child

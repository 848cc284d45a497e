"""The certificates child: a per-cluster actor that keeps a TLS cluster's certificates valid.

It reads the cluster's certificates through the platform's `CertificateStore`, renews the leaves
actors/certificates.py says are due (with the spec's validity), records a `CertificatesRenewed`
Event per renewal (a warning `CertificatesRenewalFailed` when the store refuses, once per
streak), and reports what it read in `ServiceReports.tls` for status.tls and the
CertificatesValid condition. It sleeps until the earliest leaf is due (at most a minute), so a
supervisor that was down longer than a leaf's life renews it as soon as the cluster starts.
A renewal restarts nothing: etcd reads its key pair at each TLS handshake, and the store swaps
the files whole.

It also takes a CA rotation (actors/ca_rotation.py) from phase to phase: each phase is one
store change, after which the cluster actor's rolling restart brings every member onto the new
trust material (the digest it reports in `ServiceReports.tls`); the child takes the next phase
once every member runs healthy with it, and looks every tick while a rotation is under way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

import attrs
import trio

from actors.ca_rotation import CaStep, next_step, rotating
from actors.certificates import Certificate, CertificateState, TlsReport, due, seconds_until_due
from actors.cluster_context import ChildFactory, ClusterContext, ServicesReported, nudge
from actors.errors import CertificatesRefused
from actors.model import CertificatesSpec, IssuerRef, LastRotation, RotationKind
from actors.ports import CertificateStore
from supervisor.runtime import ChildSpec

# While a cluster has no certificates yet (being created) or TLS off: look again this often.
IDLE_LOOK = 5.0
# After a refused renewal: try again this soon (the leaf may be close to expiry).
RETRY_AFTER = 5.0
# Certificates the user brings: their Secret is looked at this often for a change to roll out.
BROUGHT_LOOK = 10.0
ROTATION_EVENTS = {
    CaStep.BEGIN: ("CARotationStarted", "a new CA is trusted beside the old; members restart one at a time"),
    CaStep.SWITCH: ("CARotationSwitched", "the new CA signs every leaf; members restart one at a time"),
    CaStep.DROP: ("CARotationDropping", "the old CA leaves the trust bundle; members restart one at a time"),
    CaStep.FINISH: ("CARotated", "the CA rotation is complete, the old CA trusted no more"),
}


class Renewal:
    def __init__(self, context: ClusterContext, store: CertificateStore, clock: Callable[[], float]) -> None:
        self._context = context
        self._store = store
        self._clock = clock  # wall time: certificates' dates are wall time
        self._last_rotation: LastRotation | None = None
        # Whether this child saw the cluster before it had certificates (it is new), and the
        # etcd.io/rotate-ca value it was made with: acted on from the start, not a request.
        self._saw_created = False
        self._created_with = context.desired().resource.rotate_ca

    async def run(self) -> None:
        while True:
            delay = await self.once()
            with trio.move_on_after(delay):
                await self._request_changed()

    async def _request_changed(self) -> None:
        """Until etcd.io/rotate-ca changes: a rotation asked for starts within a tick, not
        after the sleep until the next renewal."""
        request = self._request()
        while self._request() == request:
            await self._context.feed.wait_next()

    def _request(self) -> str:
        return self._context.desired().resource.rotate_ca

    async def once(self) -> float:
        """One look (a renewal, a CA rotation's step when due); the seconds to sleep before the next."""
        resource = self._context.desired().resource
        spec = resource.spec
        if not spec.tls_enabled:
            return IDLE_LOOK
        if spec.tls_secret:
            return await self._brought(spec.tls_secret)
        if spec.tls_issuer is not None and self._store.follows_issuers:
            return await self._brought(spec.tls_issuer)
        state = await self._store.read(self._context.ref)
        if state is None:
            self._saw_created = True
            return IDLE_LOOK
        failure = ""
        try:
            state = await self._baseline(state)
            state = await self._renew_due(state, spec.certificates)
            state = await self._rotate_ca(state, resource.rotate_ca, spec.certificates)
        except CertificatesRefused as e:
            failure = str(e)
            await self._refused(failure)
        self._report(TlsReport(state, failure, self._last_rotation))
        if failure:
            return RETRY_AFTER
        if rotating(state):
            return self._context.timing.tick
        return max(seconds_until_due(state, spec.certificates, self._clock()), 1.0)

    async def _brought(self, source: str | IssuerRef) -> float:
        """Certificates the user brings (their Secret) or cert-manager issues (issuerRef): follow
        them and report; nothing is renewed here."""
        failure = ""
        try:
            await self._store.follow_source(self._context.ref, source)
        except CertificatesRefused as e:
            failure = str(e)
            await self._refused(failure)
        state = await self._store.read(self._context.ref)
        if state is not None or failure:  # never usable yet: the failure is said all the same
            issued = isinstance(source, IssuerRef)
            self._report(TlsReport(state, failure, source=str(source), issued=issued))
        return RETRY_AFTER if failure else BROUGHT_LOOK

    async def _baseline(self, state: CertificateState) -> CertificateState:
        """A cluster this child saw created takes the rotate-ca value it was created with as
        acted on: the annotation asks for a rotation only by changing."""
        if not (self._saw_created and state.record.handled_request is None):
            return state
        record = attrs.evolve(state.record, handled_request=self._created_with)
        await self._store.write_record(self._context.ref, record)
        return await self._reread(state)

    async def _renew_due(self, state: CertificateState, certificates: CertificatesSpec) -> CertificateState:
        names = due(state, certificates, self._clock())
        if not names:
            return state
        await self._store.renew(self._context.ref, names, certificates.validity_seconds)
        self._last_rotation = LastRotation(RotationKind.LEAF, self._clock())
        state = await self._reread(state)
        await self._renewed(names, state.earliest_leaf())
        return state

    async def _rotate_ca(
        self, state: CertificateState, request: str, certificates: CertificatesSpec
    ) -> CertificateState:
        resource = self._context.desired().resource
        if resource.suspended or resource.spec.hibernate:
            return state  # a rotation's steps restart members: none while suspended or hibernated
        decision = next_step(state, request, self._clock(), members_in_step=self._members_in_step(state))
        if decision is None:
            return state
        ref, store, now = self._context.ref, self._store, self._clock()
        if decision.step is CaStep.BEGIN:
            handled = request or state.record.handled_request
            record = attrs.evolve(state.record, handled_request=handled, begun_at=now)
            await store.begin_ca_rotation(ref, certificates.ca_validity_seconds, record)
        elif decision.step is CaStep.SWITCH:
            await store.switch_ca(ref, certificates.validity_seconds)
        elif decision.step is CaStep.DROP:
            await store.drop_old_ca(ref)
        else:
            await store.write_record(ref, attrs.evolve(state.record, completed_at=now))
            self._last_rotation = LastRotation(RotationKind.CA, now)
        reason, message = ROTATION_EVENTS[decision.step]
        await self._context.ports.events.record(ref, reason=reason, message=f"{decision.why}: {message}")
        return await self._reread(state)

    def _members_in_step(self, state: CertificateState) -> bool:
        """Every member runs, answers, and started with the store's trust material now."""
        observed = self._context.feed.latest
        if observed is None or not observed.runtime:
            return False
        return all(r.trust == state.trust and observed.is_healthy(r.name) for r in observed.runtime)

    async def _reread(self, state: CertificateState) -> CertificateState:
        return await self._store.read(self._context.ref) or state

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

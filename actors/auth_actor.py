"""The auth child: a per-cluster actor that keeps etcd's users and roles as spec.security.auth
says (actors/auth_plan.py decides the steps) and the users' client certificates issued.

It acts only on a cluster with a healthy quorum, not hibernated nor suspended, and not on a
cluster to adopt before a member of ours runs (its quorum is the old members': the old cluster
is left as it is until the adoption began, plan/adoption.py). It looks once at its start (so a
cluster whose spec dropped auth is cleaned up), again when what is wanted changes
(spec.security.auth, the certificates' lives, suspend, hibernate), at the cluster actor's next
look after one that could not go through, and at least every LOOK seconds, to put back what was
changed by hand, renew the users' certificates and apply changed password sources. Not that
last while auth is unused (`auth_plan.unused`: the spec asks for nothing, and etcd was found
with auth off and no user of the supervisor's): most clusters, which would otherwise be read
(three calls) every LOOK for nothing; auth turned on by hand on such a cluster is then seen at
the next look, not within LOOK. Each look that changes something is an Event `AuthReconciled`
naming the steps; a refusal is a warning `AuthReconcileFailed` (once per streak) and is tried
again at the next look. Users and roles are etcd's, not membership: this child changes them
itself, beside the cluster actor's steps, as the certificates child renews certificates. A
password source that changed is applied at the next look (each look reads every password of an
existing user; which differ from what etcd holds, actors/auth_passwords.py, with the memory of
this child's PasswordBook).
"""

from __future__ import annotations

import enum
import math

import trio

from actors.auth_passwords import PasswordBook, matches
from actors.auth_plan import AuthState, AuthStep, Op, auth_steps, unused
from actors.cluster_context import ChildFactory, ClusterContext
from actors.errors import EtcdError
from actors.model import AuthSpec
from actors.plan.adoption import not_begun
from actors.ports import AuthFactory, EtcdAuth
from supervisor.runtime import ChildSpec

LOOK = 30.0  # a user's certificate nearing renewal, a user changed by hand: looked at this often


class Look(enum.Enum):
    """How a look ended, and so when the next one is due."""

    FAILED = "could not go through"  # at the cluster actor's next look
    KEPT = "etcd holds what the spec says"  # when what is wanted changes, or after LOOK
    UNUSED = "auth neither wanted nor used"  # only when what is wanted changes


class AuthReconciler:
    def __init__(self, context: ClusterContext, auth: EtcdAuth) -> None:
        self._context = context
        self._auth = auth
        self._failing = False
        self._passwords = PasswordBook()

    async def run(self) -> None:
        while True:
            look = await self.once()
            with trio.move_on_after(math.inf if look is Look.UNUSED else LOOK):
                await self._until_worth_a_look(settled=look is not Look.FAILED)

    async def _until_worth_a_look(self, settled: bool) -> None:
        """After a look that went through, until what is wanted changes: reading every user and
        role costs two etcd calls each, too many to repeat at every look of the cluster actor.
        After one that could not (no quorum yet, a refusal), at the cluster actor's next look."""
        wanted = self._wanted()
        await self._context.feed.wait_next()
        while settled and self._wanted() == wanted:
            await self._context.feed.wait_next()

    def _wanted(self) -> object:
        resource = self._context.desired().resource
        return resource.spec.auth, resource.spec.certificates, resource.suspended, resource.spec.hibernate

    async def once(self) -> Look:
        """One look: FAILED, or KEPT (etcd holds what the spec says), or UNUSED."""
        resource = self._context.desired().resource
        spec = resource.spec
        observed = self._context.feed.latest
        if resource.suspended or spec.hibernate or observed is None or not observed.has_quorum():
            return Look.FAILED
        if not_begun(spec, observed.runtime):  # the old cluster is left as it is till then
            return Look.FAILED
        try:
            endpoints = observed.endpoints()
            state = await self._auth.read(endpoints)
            sources = await self._password_sources(spec.auth, state)
            steps = auth_steps(spec.auth, state, await self._changed(sources, state))
            for step in steps:
                await self._auth.apply(endpoints, step)
                self._remember(step, sources)
            issued = [
                user.name
                for user in spec.auth.users
                if user.client_cert_secret
                and await self._auth.issue_user_certificate(user, spec.certificates)
            ]
        except EtcdError as e:
            if not self._failing:
                await self._record(
                    "AuthReconcileFailed", f"users and roles not reconciled: {e}", warning=True
                )
            self._failing = True
            return Look.FAILED
        self._failing = False
        done = [step.describe() for step in steps] + [
            f"client certificate issued to {name}" for name in issued
        ]
        if done:
            await self._record("AuthReconciled", "; ".join(done))
        return Look.UNUSED if unused(spec.auth, state) else Look.KEPT

    async def _password_sources(self, auth: AuthSpec, state: AuthState) -> dict[str, str]:
        """The source password of each existing user that has one (new users get theirs made)."""
        return {
            user.name: await self._auth.password(user.password_secret)
            for user in auth.users
            if user.password_secret and user.name in state.users
        }

    async def _changed(self, sources: dict[str, str], state: AuthState) -> frozenset[str]:
        """Users whose source is not the password etcd holds: not known from memory, and not
        the one recorded in etcd (scrypt, off the event loop; once per user after a start)."""
        changed = set()
        for user, password in sources.items():
            if self._passwords.known(user, password):
                continue
            record = state.password_records.get(user)
            if record is not None and await trio.to_thread.run_sync(matches, record, password):
                self._passwords.learn(user, password)
            else:
                changed.add(user)
        return frozenset(changed)

    def _remember(self, step: AuthStep, sources: dict[str, str]) -> None:
        if step.op is Op.USER_PASSWORD and step.name in sources:
            self._passwords.learn(step.name, sources[step.name])
        elif step.op in (Op.USER_ADD, Op.USER_DELETE, Op.USER_CLEAR_PASSWORD):
            self._passwords.forget(step.name)  # the next look reads its record

    async def _record(self, reason: str, message: str, *, warning: bool = False) -> None:
        await self._context.ports.events.record(
            self._context.ref, reason=reason, message=message, warning=warning
        )


def auth_child(auth_for: AuthFactory) -> ChildFactory:
    """The per-cluster child that reconciles etcd's users and roles through `auth_for(ref)`."""

    def child(context: ClusterContext) -> ChildSpec:
        async def start(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            task_status.started()
            await AuthReconciler(context, auth_for(context.ref)).run()

        return ChildSpec("auth", start, shutdown=2.0)

    return child

"""etcd users and roles from spec.security.auth, decided from what etcd holds: the supervisor's
own users first, roles before the users who hold them, managed users and roles marked in etcd
and removed when the spec drops them, what the supervisor did not make left alone, and nothing
to do once etcd holds what the spec says."""

import attrs

from actors.auth_plan import (
    MANAGED,
    ROOT,
    SUPERVISOR,
    AuthState,
    AuthStep,
    Op,
    auth_steps,
    grant_of,
    prefix_end,
    unused,
)
from actors.model import AuthSpec, Permission, PermissionType, RoleSpec, UserSpec

RW = PermissionType.READWRITE
APP_RW = RoleSpec("app-rw", (Permission(RW, "/app/", prefix=True),))
APP = UserSpec("app", ("app-rw",), client_cert_secret="app-etcd-client")
SPEC = AuthSpec(enabled=True, users=(APP,), roles=(APP_RW,))
EMPTY = AuthState(False, {}, {})


def apply(state: AuthState, steps: list[AuthStep]) -> AuthState:
    """What etcd would hold after the steps (a model of etcd's auth store for these tests)."""
    users = {k: set(v) for k, v in state.users.items()}
    roles = {k: set(v) for k, v in state.roles.items()}
    enabled = state.enabled
    records = dict(state.password_records)  # who has a password the supervisor set
    for s in steps:
        match s.op:
            case Op.ROLE_ADD:
                roles[s.name] = set()
            case Op.ROLE_GRANT:  # etcd keeps one permission per range: a grant replaces its type
                roles[s.name] = {g for g in roles[s.name] if g[1:] != s.grant[1:]} | {s.grant}
            case Op.ROLE_REVOKE:  # by range, whatever its type
                roles[s.name] = {g for g in roles[s.name] if g[1:] != s.grant[1:]}
            case Op.ROLE_DELETE:
                del roles[s.name]
                for held in users.values():
                    held.discard(s.name)
            case Op.USER_ADD:
                users[s.name] = set()
                if s.password_secret:
                    records[s.name] = "digest"
            case Op.USER_PASSWORD:
                assert s.name in users
                records[s.name] = "digest"
            case Op.USER_CLEAR_PASSWORD:  # deleted and added again, without a password
                assert s.name in users
                users[s.name] = set()
                records.pop(s.name, None)
            case Op.USER_GRANT:
                assert s.role in roles, f"{s.role} granted before it exists"
                users[s.name].add(s.role)
            case Op.USER_REVOKE:
                users[s.name].discard(s.role)
            case Op.USER_DELETE:
                del users[s.name]
                records.pop(s.name, None)
            case Op.AUTH_ENABLE:
                assert ROOT in users and ROOT in users[ROOT], "etcd refuses auth without root"
                enabled = True
            case Op.AUTH_DISABLE:
                enabled = False
    return AuthState(
        enabled,
        {k: frozenset(v) for k, v in users.items()},
        {k: frozenset(v) for k, v in roles.items()},
        records,
    )


def test_a_prefix_ends_where_etcd_expects():
    assert prefix_end(b"/app/") == b"/app0"
    assert prefix_end(b"a\xff") == b"b"
    assert grant_of(Permission(RW, "/k")) == (RW, b"/k", b"")


def test_from_nothing_to_the_spec_and_then_nothing_more():
    steps = auth_steps(SPEC, EMPTY)
    assert steps[-1] == AuthStep(Op.AUTH_ENABLE)
    after = apply(EMPTY, steps)
    assert after.users[ROOT] == {ROOT} and after.users[SUPERVISOR] == {ROOT, "app-rw"}
    assert after.users["app"] == {"app-rw", MANAGED}
    assert after.roles["app-rw"] == {(RW, b"/app/", b"/app0")}
    assert auth_steps(SPEC, after) == []


def test_a_cluster_without_auth_in_its_spec_is_never_touched():
    assert auth_steps(AuthSpec(), EMPTY) == []
    theirs = AuthState(True, {"root": frozenset({"root"}), "ops": frozenset({"root"})}, {"root": frozenset()})
    assert auth_steps(AuthSpec(), theirs) == [AuthStep(Op.AUTH_DISABLE)]  # spec says off


def test_auth_is_unused_only_when_the_spec_asks_nothing_and_etcd_has_it_off_with_nothing_of_ours():
    assert unused(AuthSpec(), EMPTY)
    theirs = AuthState(False, {"ops": frozenset({"root"})}, {"root": frozenset()})
    assert unused(AuthSpec(), theirs) and auth_steps(AuthSpec(), theirs) == []  # not ours, and off
    assert not unused(AuthSpec(), AuthState(True, {}, {}))  # on: to be turned off
    kept = apply(EMPTY, auth_steps(SPEC, EMPTY))
    assert not unused(SPEC, kept) and not unused(SPEC, EMPTY)
    dropped = AuthState(False, kept.users, kept.roles)  # auth off in the spec, our users still there
    assert not unused(AuthSpec(), dropped)
    assert unused(AuthSpec(), apply(dropped, auth_steps(AuthSpec(), dropped)))  # once cleaned up
    assert not unused(AuthSpec(users=(APP,), roles=(APP_RW,)), EMPTY)  # users kept with auth off


def test_users_and_roles_the_supervisor_did_not_make_are_left_alone():
    theirs = apply(EMPTY, auth_steps(SPEC, EMPTY))
    users = {**theirs.users, "legacy": frozenset({"legacy-role"})}
    roles = {**theirs.roles, "legacy-role": frozenset({(RW, b"/x", b"")})}
    state = AuthState(True, users, roles)
    assert auth_steps(SPEC, state) == []
    assert "legacy" in apply(state, auth_steps(AuthSpec(enabled=True), state)).users


def test_a_user_and_a_role_dropped_from_the_spec_are_removed_and_a_permission_changed():
    state = apply(EMPTY, auth_steps(SPEC, EMPTY))
    narrower = RoleSpec("app-rw", (Permission(PermissionType.READ, "/app/", prefix=True),))
    narrow = AuthSpec(enabled=True, users=(APP,), roles=(narrower,))
    steps = auth_steps(narrow, state)
    assert [s.op for s in steps] == [Op.ROLE_GRANT]  # a revoke of the same range would undo it
    assert apply(state, steps).roles["app-rw"] == {(PermissionType.READ, b"/app/", b"/app0")}
    moved = AuthSpec(enabled=True, users=(APP,), roles=(RoleSpec("app-rw", (Permission(RW, "/b/"),)),))
    assert [s.op for s in auth_steps(moved, state)] == [Op.ROLE_GRANT, Op.ROLE_REVOKE]
    steps = auth_steps(AuthSpec(enabled=True), state)
    assert steps == [AuthStep(Op.USER_DELETE, "app"), AuthStep(Op.ROLE_DELETE, "app-rw")]
    after = apply(state, steps)
    assert "app" not in after.users and "app-rw" not in after.roles and after.enabled


def test_turning_auth_off_keeps_the_users():
    state = apply(EMPTY, auth_steps(SPEC, EMPTY))
    off = AuthSpec(enabled=False, users=(APP,), roles=(APP_RW,))
    assert auth_steps(off, state) == [AuthStep(Op.AUTH_DISABLE)]


def test_a_changed_password_source_is_applied_to_an_existing_user_only():
    with_password = UserSpec("app", ("app-rw",), password_secret="app-etcd-password")
    spec = AuthSpec(enabled=True, users=(with_password, UserSpec("ops")), roles=(APP_RW,))
    state = apply(EMPTY, auth_steps(spec, EMPTY))
    assert auth_steps(spec, state) == []  # unchanged: nothing
    change = AuthStep(Op.USER_PASSWORD, "app", password_secret="app-etcd-password")
    assert auth_steps(spec, state, frozenset({"app", "ops"})) == [change]  # ops has no password
    assert change.describe() == "change password of user app"
    # A user not in etcd yet is made with its password, not changed.
    assert AuthStep(Op.USER_ADD, "app", password_secret="app-etcd-password") in auth_steps(
        spec, EMPTY, frozenset({"app"})
    )
    assert not [s for s in auth_steps(spec, EMPTY, frozenset({"app"})) if s.op is Op.USER_PASSWORD]


def test_a_password_taken_out_of_the_spec_is_taken_away_and_the_roles_given_back():
    with_password = UserSpec("app", ("app-rw",), password_secret="app-etcd-password")
    spec = AuthSpec(enabled=True, users=(with_password,), roles=(APP_RW,))
    state = apply(EMPTY, auth_steps(spec, EMPTY))
    assert state.password_records.keys() == {"app"}
    without = AuthSpec(enabled=True, users=(APP,), roles=(APP_RW,))
    steps = auth_steps(without, state)
    assert steps == [
        AuthStep(Op.USER_CLEAR_PASSWORD, "app"),
        AuthStep(Op.USER_GRANT, "app", role="app-rw"),
        AuthStep(Op.USER_GRANT, "app", role=MANAGED),
    ]
    assert steps[0].describe() == "remove password of user app"
    after = apply(state, steps)
    assert after.users["app"] == state.users["app"] and not after.password_records
    assert auth_steps(without, after) == []
    # A user without a record (its password set by hand, or before records were kept) is left
    # as it is: the supervisor does not know it has one.
    assert auth_steps(without, attrs.evolve(state, password_records={})) == []

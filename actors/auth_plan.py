"""etcd's users and roles as spec.security.auth wants them: the steps from what etcd holds.

Pure. The supervisor keeps etcd's `root` user and role (auth cannot be on without them) and its
own user (its client certificate's CN, with the root role). What it manages is marked in etcd
itself, so a restarted supervisor knows without a record of its own and never touches what it
did not make: a managed user holds the role MANAGED (which grants nothing); a managed role is
granted to the supervisor's own user (which may do everything anyway, so the grant changes
nothing it can do). A user or role gone from the spec and so marked is removed; others stay.
A user whose password source differs from what etcd holds (actors/auth_passwords.py tells
which) has its password changed; one whose passwordSecret was taken out of the spec, and whose
password the supervisor set (its record is in etcd), has it taken away.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from attrs import field, frozen

from actors.model import AuthSpec, Permission, PermissionType, RoleSpec, UserSpec

ROOT = "root"
SUPERVISOR = "etcd-supervisor"  # the CN of the supervisor's client certificate, in both modes
MANAGED = "etcd-supervisor-managed"

# (type, key, range_end) as etcd keeps a permission: range_end empty for one key, "\0" for
# every key from `key` on, the prefix's end for a prefix.
Grant = tuple[PermissionType, bytes, bytes]


class Op(enum.Enum):
    ROLE_ADD = "add role"
    ROLE_GRANT = "grant permission"
    ROLE_REVOKE = "revoke permission"
    ROLE_DELETE = "delete role"
    USER_ADD = "add user"
    USER_PASSWORD = "change password of user"
    USER_CLEAR_PASSWORD = "remove password of user"
    USER_GRANT = "grant role"
    USER_REVOKE = "revoke role"
    USER_DELETE = "delete user"
    AUTH_ENABLE = "enable auth"
    AUTH_DISABLE = "disable auth"


@frozen
class AuthStep:
    op: Op
    name: str = ""  # the user or role
    role: str = ""  # USER_GRANT, USER_REVOKE
    grant: Grant | None = None  # ROLE_GRANT, ROLE_REVOKE
    password_secret: str | None = None  # USER_ADD (None: a user without password), USER_PASSWORD

    def describe(self) -> str:
        if self.grant is not None:
            kind, key, end = self.grant
            reach = "prefix" if end and end != b"\0" else "from key on" if end else "key"
            return (
                f"{self.op.value} {kind.value} {key.decode(errors='replace')!r} ({reach}) of role {self.name}"
            )
        if self.role:
            return f"{self.op.value} {self.role} of user {self.name}"
        return f"{self.op.value} {self.name}".strip()


@frozen
class AuthState:
    """What etcd holds: whether auth is on, each user's roles, each role's permissions; and the
    record of the password the supervisor last set for each user (actors/auth_passwords.py)."""

    enabled: bool
    users: Mapping[str, frozenset[str]]
    roles: Mapping[str, frozenset[Grant]]
    password_records: Mapping[str, str] = field(factory=dict)


def grant_of(permission: Permission) -> Grant:
    key = permission.key.encode()
    return permission.type, key, prefix_end(key) if permission.prefix else b""


def prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with `prefix` (etcd's range_end for a prefix)."""
    for i in range(len(prefix) - 1, -1, -1):
        if prefix[i] < 0xFF:
            return prefix[:i] + bytes([prefix[i] + 1])
    return b"\0"


def auth_steps(spec: AuthSpec, state: AuthState, changed: frozenset[str] = frozenset()) -> list[AuthStep]:
    """Every step to make etcd hold what `spec` says, in an order etcd accepts; [] when it does.
    `changed`: users whose password source differs from the password they hold."""
    if _asks_nothing(spec) and not _managed_users(state):
        if state.enabled:
            return [AuthStep(Op.AUTH_DISABLE)]
        return []  # never used: nothing of the supervisor's is made
    steps = _own(state)
    for role in spec.roles:
        steps += _role(role, state)
    for user in spec.users:
        steps += _user(user, state, changed)
    steps += _gone(spec, state)
    if spec.enabled != state.enabled:
        steps.append(AuthStep(Op.AUTH_ENABLE if spec.enabled else Op.AUTH_DISABLE))
    return steps


def unused(spec: AuthSpec, state: AuthState) -> bool:
    """Auth neither wanted nor in use: the spec asks for nothing, and etcd has auth off and no
    user the supervisor made. Nothing is to be done (`auth_steps` is []) and nothing of the
    supervisor's can drift, so there is no need to read etcd again until the spec asks for
    something."""
    return _asks_nothing(spec) and not state.enabled and not _managed_users(state)


def _asks_nothing(spec: AuthSpec) -> bool:
    return not spec.enabled and not spec.users and not spec.roles


def _own(state: AuthState) -> list[AuthStep]:
    """root and the supervisor's user, each with the root role; the marker role."""
    steps = [AuthStep(Op.ROLE_ADD, role) for role in (ROOT, MANAGED) if role not in state.roles]
    for user in (ROOT, SUPERVISOR):
        if user not in state.users:
            steps.append(AuthStep(Op.USER_ADD, user))
        if ROOT not in state.users.get(user, frozenset()):
            steps.append(AuthStep(Op.USER_GRANT, user, role=ROOT))
    return steps


def _role(role: RoleSpec, state: AuthState) -> list[AuthStep]:
    steps = [] if role.name in state.roles else [AuthStep(Op.ROLE_ADD, role.name)]
    have = state.roles.get(role.name, frozenset())
    want = {grant_of(p) for p in role.permissions}
    # etcd keeps one permission per range (key, range_end): a grant on a range it has replaces
    # its type in place, so only ranges no longer wanted are revoked (a revoke of a range whose
    # type changed would take away the new grant).
    wanted_ranges = {g[1:] for g in want}
    steps += [AuthStep(Op.ROLE_GRANT, role.name, grant=g) for g in sorted(want - have, key=_order)]
    gone = (g for g in have if g[1:] not in wanted_ranges)
    steps += [AuthStep(Op.ROLE_REVOKE, role.name, grant=g) for g in sorted(gone, key=_order)]
    if role.name not in state.users.get(SUPERVISOR, frozenset()):
        steps.append(AuthStep(Op.USER_GRANT, SUPERVISOR, role=role.name))  # marks it managed
    return steps


def _user(user: UserSpec, state: AuthState, changed: frozenset[str]) -> list[AuthStep]:
    if user.name not in state.users:
        steps = [AuthStep(Op.USER_ADD, user.name, password_secret=user.password_secret)]
    elif user.password_secret and user.name in changed:
        steps = [AuthStep(Op.USER_PASSWORD, user.name, password_secret=user.password_secret)]
    elif not user.password_secret and user.name in state.password_records:
        # etcd cannot take a password away (UserChangePassword only sets one): the user is made
        # anew without one (auth_store.py), so every role it holds is granted again after.
        return [AuthStep(Op.USER_CLEAR_PASSWORD, user.name)] + [
            AuthStep(Op.USER_GRANT, user.name, role=r) for r in sorted({*user.roles, MANAGED})
        ]
    else:
        steps = []
    have = state.users.get(user.name, frozenset())
    want = {*user.roles, MANAGED}
    steps += [AuthStep(Op.USER_GRANT, user.name, role=r) for r in sorted(want - have)]
    steps += [AuthStep(Op.USER_REVOKE, user.name, role=r) for r in sorted(have - want)]
    return steps


def _gone(spec: AuthSpec, state: AuthState) -> list[AuthStep]:
    """Managed users and roles the spec no longer names: users first (they hold the roles)."""
    users = {u.name for u in spec.users}
    roles = {r.name for r in spec.roles}
    steps = [AuthStep(Op.USER_DELETE, name) for name in sorted(_managed_users(state) - users)]
    managed_roles = state.users.get(SUPERVISOR, frozenset()) - {ROOT}
    steps += [AuthStep(Op.ROLE_DELETE, name) for name in sorted(managed_roles - roles) if name in state.roles]
    return steps


def _managed_users(state: AuthState) -> set[str]:
    return {name for name, roles in state.users.items() if MANAGED in roles}


def _order(grant: Grant) -> tuple[str, bytes, bytes]:
    return grant[0].value, grant[1], grant[2]

"""spec.security.auth: etcd users and roles the supervisor reconciles, with the rules that name
the field: etcd's own limits on names, roles a user names must exist, names used once, and the
names the supervisor keeps for itself."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from actors.codec.fields import Reader, secret_name
from actors.model import AuthSpec, Permission, PermissionType, RoleSpec, UserSpec

AUTH = "spec.security.auth"
# The supervisor's own: etcd's root user and role (auth cannot be on without them), the
# supervisor's identity (its client certificate's CN) and the marker role of managed users.
RESERVED_USERS = frozenset({"root", "etcd-supervisor"})
RESERVED_ROLES = frozenset({"root", "etcd-supervisor-managed"})
# etcd takes any string; these stay usable as a certificate CN, a file name and a Secret key.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"


def parse_auth(security: Mapping[str, Any], r: Reader) -> AuthSpec:
    doc = r.mapping(security, "auth", AUTH, {"enabled", "users", "roles"})
    roles = tuple(_role(item, f"{AUTH}.roles[{i}]", r) for i, item in enumerate(_items(doc, "roles", r)))
    users = tuple(_user(item, f"{AUTH}.users[{i}]", r) for i, item in enumerate(_items(doc, "users", r)))
    _once(r, "roles", [role.name for role in roles])
    _once(r, "users", [user.name for user in users])
    known = {role.name for role in roles}
    for i, user in enumerate(users):
        for role in user.roles:
            if role not in known:
                r.fail(
                    f"{AUTH}.users[{i}].roles",
                    f"names role {role!r}, which spec.security.auth.roles does not define",
                )
    return AuthSpec(enabled=r.boolean(doc, "enabled", f"{AUTH}.enabled", False), users=users, roles=roles)


def _items(doc: Mapping[str, Any], key: str, r: Reader) -> Sequence[Mapping[str, Any]]:
    value = doc.get(key) or []
    if isinstance(value, str) or not isinstance(value, Sequence):
        r.fail(f"{AUTH}.{key}", "must be a list")
        return []
    good = [item for item in value if isinstance(item, Mapping)]
    if len(good) != len(value):
        r.fail(f"{AUTH}.{key}", "must be a list of objects")
    return good


def _name(doc: Mapping[str, Any], path: str, reserved: frozenset[str], r: Reader) -> str:
    name = r.string(doc, "name", f"{path}.name", None)
    if not name:
        r.fail(f"{path}.name", "required")
        return ""
    if not NAME_PATTERN.match(name):
        r.fail(f"{path}.name", f"must be {NAME_RULE} (got {name!r})")
    elif name in reserved:
        r.fail(f"{path}.name", f"{name!r} is the supervisor's own: choose another name")
    return name


def _role(doc: Mapping[str, Any], path: str, r: Reader) -> RoleSpec:
    unknown = set(doc) - {"name", "permissions"}
    for key in sorted(unknown):
        r.fail(f"{path}.{key}", "unknown field")
    perms = doc.get("permissions") or []
    if isinstance(perms, str) or not isinstance(perms, Sequence):
        r.fail(f"{path}.permissions", "must be a list")
        perms = []
    permissions = tuple(
        p
        for i, item in enumerate(perms)
        if (p := _permission(item, f"{path}.permissions[{i}]", r)) is not None
    )
    return RoleSpec(name=_name(doc, path, RESERVED_ROLES, r), permissions=permissions)


def _permission(item: Any, path: str, r: Reader) -> Permission | None:
    if not isinstance(item, Mapping):
        r.fail(path, "must be an object with type, key and prefix")
        return None
    for key in sorted(set(item) - {"type", "key", "prefix"}):
        r.fail(f"{path}.{key}", "unknown field")
    kind = r.string(item, "type", f"{path}.type", None)
    if kind not in {t.value for t in PermissionType}:
        r.fail(f"{path}.type", f"must be one of read, write, readwrite (got {kind!r})")
        return None
    key = r.string(item, "key", f"{path}.key", None)
    if not key:
        r.fail(f"{path}.key", "required: the key, or with prefix: true the prefix, such as /app/")
        return None
    return Permission(PermissionType(kind), key, r.boolean(item, "prefix", f"{path}.prefix", False))


def _user(doc: Mapping[str, Any], path: str, r: Reader) -> UserSpec:
    for key in sorted(set(doc) - {"name", "roles", "clientCertSecret", "passwordSecret"}):
        r.fail(f"{path}.{key}", "unknown field")
    roles = doc.get("roles") or []
    if (
        isinstance(roles, str)
        or not isinstance(roles, Sequence)
        or not all(isinstance(x, str) for x in roles)
    ):
        r.fail(f"{path}.roles", "must be a list of role names")
        roles = []
    return UserSpec(
        name=_name(doc, path, RESERVED_USERS, r),
        roles=tuple(roles),
        client_cert_secret=secret_name(doc, "clientCertSecret", f"{path}.clientCertSecret", r),
        password_secret=secret_name(doc, "passwordSecret", f"{path}.passwordSecret", r),
    )


def _once(r: Reader, what: str, names: list[str]) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name and name in seen:
            r.fail(f"{AUTH}.{what}[{i}].name", f"{name!r} is defined twice")
        seen.add(name)

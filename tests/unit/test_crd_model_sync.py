"""The CRD (crds/etcdclusters.etcd.io.yaml) and the domain model (actors/model.py) describe the
same resource: same fields, same defaults, same limits, same enums. A change to one without the
other fails here, not in a cluster."""

from __future__ import annotations

import copy
import enum
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from actors import model
from actors.pod_template import OWNED_SPEC_FIELDS

CRD_FILE = Path(__file__).resolve().parents[2] / "crds" / "etcdclusters.etcd.io.yaml"
ABSENT = object()

# ClusterSpec attribute -> its path under .spec. The model flattens a few nested objects
# (security.tls.enabled, debug.networkSidecar); this table is the one place that says so.
SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "size": ("size",),
    "version": ("version",),
    "repository": ("repository",),
    "storage": ("storage",),
    "tls_enabled": ("security", "tls", "enabled"),
    "certificates": ("security", "tls", "certificates"),
    "tls_secret": ("security", "tls", "secretRef", "name"),
    "tls_issuer": ("security", "tls", "issuerRef"),
    "etcd_options": ("etcdOptions",),
    "pod_template": ("podTemplate",),
    "resources": ("resources",),
    "debug_sidecar": ("debug", "networkSidecar"),
    "health": ("health",),
    "backup": ("backup",),
    "restore": ("restore",),
    "maintenance": ("maintenance",),
    "disaster_recovery": ("disasterRecovery",),
    "hibernate": ("hibernate",),
    "adopt": ("adopt",),
    "auth": ("security", "auth"),
    "network_policy": ("security", "networkPolicy"),
    "client_selector": ("security", "clientSelector"),
}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    # Kubernetes spells initialisms in capitals: peerURL and peerCASecret, not peerUrl, peerCaSecret.
    return head + "".join(part.upper() if part in ("url", "ca") else part.capitalize() for part in rest)


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_FILE.read_text())


@pytest.fixture(scope="module")
def version(crd: dict[str, Any]) -> dict[str, Any]:
    (v,) = (v for v in crd["spec"]["versions"] if v["storage"])
    return v


@pytest.fixture(scope="module")
def schema(version: dict[str, Any]) -> dict[str, Any]:
    return version["schema"]["openAPIV3Schema"]["properties"]


def node(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    for name in path:
        schema = schema["properties"][name]
    return schema


# Kubernetes types the CRD spells out field by field and the model holds whole, as Kubernetes
# writes them (the codec checks their fields): one leaf each.
KUBE_TYPES = {
    ("podTemplate", "spec", "affinity"),
    ("podTemplate", "spec", "securityContext"),
    ("security", "clientSelector"),
}


def leaves(schema: dict[str, Any], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Paths of the scalar and map fields below an object schema."""
    out: set[tuple[str, ...]] = set()
    for name, sub in schema.get("properties", {}).items():
        if (*prefix, name) in KUBE_TYPES:
            out.add((*prefix, name))
        elif sub.get("type") == "object" and "properties" in sub:
            out |= leaves(sub, (*prefix, name))
        else:
            out.add((*prefix, name))
    return out


def apply_defaults(schema: dict[str, Any], value: Any = ABSENT) -> Any:
    """Structural defaulting as the API server does it: a default fills an absent field, then
    defaults apply inside the objects that exist."""
    if value is ABSENT and "default" in schema:
        value = copy.deepcopy(schema["default"])
    if isinstance(value, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            got = apply_defaults(sub, value.get(name, ABSENT))
            if got is not ABSENT:
                value[name] = got
    return value


def model_value(value: Any) -> Any:
    """A model value as the resource would hold it; None, empty maps and lists are "not set"."""
    if isinstance(value, enum.Enum):
        return value.value
    if attrs.has(type(value)):
        value = {camel(f.name): model_value(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, Mapping):
        unset = (None, {}, ())
        return {k: model_value(v) for k, v in value.items() if v is not None and model_value(v) not in unset}
    return value


def test_identity(crd: dict[str, Any], version: dict[str, Any]) -> None:
    assert crd["spec"]["group"] == model.API_GROUP
    assert crd["spec"]["names"]["kind"] == model.KIND
    assert version["name"] == model.API_VERSION
    assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.{model.API_GROUP}"


def record_type(annotation: object) -> type | None:
    """The attrs class an annotation names ("BackupSpec | None" included), if any."""
    for name in str(annotation).replace(" ", "").split("|"):
        found = getattr(model, name, None)
        if isinstance(found, type) and attrs.has(found):
            return found
    return None


def record_leaves(record: type, prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for f in attrs.fields(record):
        nested = record_type(f.type)
        path = (*prefix, camel(f.name))
        out |= record_leaves(nested, path) if nested is not None else {path}
    return out


# Fields of the resource the daemon reads but the model does not hold.
CRD_ONLY: set[tuple[str, ...]] = {
    # Pod fields the supervisor owns: in the schema only so that a CEL rule refuses each by name.
    *(("podTemplate", "spec", name) for name in OWNED_SPEC_FIELDS),
}


def test_every_spec_field_is_mapped_both_ways(schema: dict[str, Any]) -> None:
    assert set(SPEC_PATHS) == {f.name for f in attrs.fields(model.ClusterSpec)}, "update SPEC_PATHS"
    crd_leaves = leaves(schema["spec"]) - CRD_ONLY
    model_leaves: set[tuple[str, ...]] = set()
    for attr, path in SPEC_PATHS.items():
        nested = record_type(attrs.fields_dict(model.ClusterSpec)[attr].type)
        model_leaves |= record_leaves(nested, path) if nested is not None else {path}
    assert crd_leaves == model_leaves


def test_spec_defaults_match(schema: dict[str, Any]) -> None:
    expected: dict[str, Any] = {}
    for attr, path in SPEC_PATHS.items():
        value = model_value(getattr(model.ClusterSpec(), attr))
        if value == {} or value is None:
            continue
        *parents, leaf = path
        target = expected
        for name in parents:
            target = target.setdefault(name, {})
        target[leaf] = value
    # What `spec: {}` becomes in the API server must be exactly ClusterSpec().
    assert apply_defaults(schema["spec"]) == expected


def test_size_limits_match(schema: dict[str, Any]) -> None:
    size = node(schema["spec"], "size")
    assert (size["minimum"], size["maximum"]) == (model.MIN_SIZE, model.MAX_SIZE)
    assert size["minimum"] <= size["default"] <= size["maximum"]


def cel_regex(field: dict[str, Any]) -> re.Pattern[str]:
    (rule,) = [r["rule"] for r in field["x-kubernetes-validations"] if "matches(" in r["rule"]]
    literal = re.search(r"matches\('(.*)'\)", rule)
    assert literal, rule
    # A CEL string literal: '\\.' is a backslash and a dot for the regex engine.
    return re.compile(literal.group(1).replace("\\\\", "\\"))


@pytest.mark.parametrize(
    "path,good,bad",
    [
        (("version",), ["3.5.21", "3.4.34", "3.6.0-rc.1"], ["v3.5.21", "3.5", "", "latest"]),
        (
            ("storage", "size"),
            ["10Gi", "512Mi", "1.5Ti", "20G", "0.5Gi"],
            ["0", "0Gi", "-1Gi", "100m", "10 Gi"],
        ),
        (
            ("repository",),
            ["quay.io/coreos/etcd", "bitnami/etcd", "localhost:5000/a/b"],
            ["etcd:v3", "a@sha256:x"],
        ),
    ],
)
def test_cel_patterns_accept_the_model_defaults(
    schema: dict[str, Any], path: tuple[str, ...], good: list[str], bad: list[str]
) -> None:
    pattern = cel_regex(node(schema["spec"], *path))
    assert pattern.search(str(node(schema["spec"], *path)["default"]))
    assert [g for g in good if not pattern.search(g)] == []
    assert [b for b in bad if pattern.search(b)] == []


def test_enums_match(schema: dict[str, Any]) -> None:
    assert node(schema["spec"], "storage", "reclaimPolicy")["enum"] == [p.value for p in model.ReclaimPolicy]
    assert node(schema["status"], "phase")["enum"] == [p.value for p in model.Phase]
    assert node(schema["spec"], "disasterRecovery", "mode")["enum"] == [m.value for m in model.RecoveryMode]
    assert node(schema["status"], "lastRecovery", "path")["enum"] == [p.value for p in model.RecoveryPath]
    members = schema["status"]["properties"]["members"]["items"]
    assert members["properties"]["role"]["enum"] == [r.value for r in model.Role]
    compaction = node(schema["spec"], "maintenance", "autoCompaction", "mode")
    assert compaction["enum"] == [m.value for m in model.CompactionMode]


@pytest.mark.parametrize(
    "record,path",
    [
        (model.ClusterStatus, ()),
        (model.MemberStatus, ("members",)),
        (model.Condition, ("conditions",)),
    ],
)
def test_status_fields_match(schema: dict[str, Any], record: type, path: tuple[str, ...]) -> None:
    sub = schema["status"]
    for name in path:
        sub = sub["properties"][name]["items"]
    assert set(sub["properties"]) == {camel(f.name) for f in attrs.fields(record)}


def test_printer_columns_and_scale_point_at_real_fields(
    version: dict[str, Any], schema: dict[str, Any]
) -> None:
    def exists(json_path: str) -> bool:
        top, *rest = json_path.lstrip(".").split(".")
        if top == "metadata":
            return True
        try:
            node(schema[top], *rest)
        except KeyError:
            return False
        return True

    for column in version["additionalPrinterColumns"]:
        assert exists(column["jsonPath"]), column
    scale = version["subresources"]["scale"]
    assert exists(scale["specReplicasPath"]) and exists(scale["statusReplicasPath"])


def test_adopt_keeps_the_models_default_limits_and_rules(schema: dict[str, Any]) -> None:
    from actors.codec.fields import CLIENT_URL_PATTERN, SECRET_NAME_PATTERN

    adopt = node(schema["spec"], "adopt")
    # Only endpoints is required; what the API server fills in is the model's default.
    assert adopt["required"] == ["endpoints"]
    filled = apply_defaults(adopt, {"endpoints": ["http://a:2379"]})
    assert filled == {
        "endpoints": ["http://a:2379"],
        "removeOld": model.AdoptSpec(("http://a:2379",)).remove_old,
    }
    endpoints = node(adopt, "endpoints")
    assert (endpoints["minItems"], endpoints["maxItems"]) == (1, model.MAX_SIZE)
    assert cel_regex(endpoints).pattern == CLIENT_URL_PATTERN.pattern
    for secret in ("clientSecret", "peerCASecret"):
        field = node(adopt, secret)
        crd_pattern = re.compile(field["pattern"])
        for name in ("old-client", "a", "a.b-c", "a" * 253, "a" * 254, "A", "-a", "a/b", "a_b", ""):
            crd_ok = len(name) <= field["maxLength"] and bool(crd_pattern.match(name))
            assert crd_ok == bool(SECRET_NAME_PATTERN.match(name)), (secret, name)

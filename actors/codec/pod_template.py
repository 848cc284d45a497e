"""spec.podTemplate -> PodTemplate: only the keys listed in actors/pod_template.py, each of the
shape Kubernetes takes (so a pod is never refused at creation for something said here), and what
the supervisor owns refused by name: `spec.podTemplate.metadata.labels["etcd.io/member"]: owned
by the supervisor`."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from actors.codec.fields import Reader
from actors.model import PodMetadata, PodSettings, PodTemplate
from actors.pod_template import (
    METADATA_FIELDS,
    OWNED_SPEC_FIELDS,
    SPEC_FIELDS,
    owned_annotation,
    owned_label,
)

PATH = "spec.podTemplate"

# Kubernetes' own syntax: a label or annotation key is an optional DNS-subdomain prefix and a name;
# a label value is at most 63 characters of the name's alphabet, or empty.
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Kubernetes takes 256 KiB of a pod's annotations in all: half of it is the user's, the rest ours.
MAX_USER_ANNOTATIONS = 128 * 1024

TOLERATION_FIELDS = {"key", "operator", "value", "effect", "tolerationSeconds"}
TOLERATION_OPERATORS = ("Exists", "Equal")
TAINT_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")
SPREAD_FIELDS = {
    "maxSkew",
    "topologyKey",
    "whenUnsatisfiable",
    "labelSelector",
    "minDomains",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
    "matchLabelKeys",
}
SPREAD_WHEN = ("DoNotSchedule", "ScheduleAnyway")
AFFINITY_FIELDS = {"nodeAffinity", "podAffinity", "podAntiAffinity"}
SECURITY_INTEGERS = ("runAsUser", "runAsGroup", "fsGroup")
SECURITY_OBJECTS = ("seLinuxOptions", "seccompProfile", "windowsOptions", "appArmorProfile")
SECURITY_FIELDS = {
    *SECURITY_INTEGERS,
    *SECURITY_OBJECTS,
    "runAsNonRoot",
    "supplementalGroups",
    "supplementalGroupsPolicy",
    "fsGroupChangePolicy",
    "sysctls",
    "seLinuxChangePolicy",
}


def key_path(path: str, key: object) -> str:
    return f"{path}[{json.dumps(str(key))}]"


def valid_label_value(value: str) -> bool:
    """A label value as Kubernetes takes it (empty included)."""
    return not value or bool(_NAME.match(value))


def valid_key(key: str) -> bool:
    """A label or annotation key as Kubernetes takes it: [prefix/]name."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return False
    return bool(_NAME.match(name))


def parse_pod_template(spec: Mapping[str, Any], r: Reader) -> PodTemplate:
    doc = r.mapping(spec, "podTemplate", PATH, {"metadata", "spec"})
    metadata = r.mapping(doc, "metadata", f"{PATH}.metadata", set(METADATA_FIELDS))
    settings = doc.get("spec")
    if settings is not None and not isinstance(settings, Mapping):
        r.fail(f"{PATH}.spec", "must be an object")
        settings = {}
    settings = settings or {}
    where = f"{PATH}.spec"
    for name in sorted(set(settings) - set(SPEC_FIELDS)):
        rule = OWNED_SPEC_FIELDS.get(name, f"unknown field (podTemplate.spec takes {', '.join(SPEC_FIELDS)})")
        r.fail(f"{where}.{name}", rule)
    return PodTemplate(
        metadata=PodMetadata(
            labels=_string_map(
                metadata, "labels", f"{PATH}.metadata.labels", r, owned=owned_label, label_values=True
            ),
            annotations=_annotations(metadata, r),
        ),
        spec=PodSettings(
            affinity=_affinity(settings, r),
            tolerations=_items(settings, "tolerations", r, TOLERATION_FIELDS, _toleration),
            node_selector=_string_map(
                settings, "nodeSelector", f"{PATH}.spec.nodeSelector", r, label_values=True
            ),
            topology_spread_constraints=_items(
                settings, "topologySpreadConstraints", r, SPREAD_FIELDS, _spread
            ),
            priority_class_name=_name(settings, "priorityClassName", r),
            image_pull_secrets=tuple(
                str(s["name"]) for s in _items(settings, "imagePullSecrets", r, {"name"}, _pull_secret)
            ),
            security_context=_security_context(settings, r),
            runtime_class_name=_name(settings, "runtimeClassName", r),
        ),
    )


LABEL_VALUE_RULE = "a label value is at most 63 letters, digits, '-', '_' or '.', alphanumeric at both ends"


def _string_map(
    doc: Mapping[str, Any],
    key: str,
    path: str,
    r: Reader,
    *,
    owned: Callable[[str], bool] | None = None,
    label_values: bool = False,
) -> dict[str, str]:
    """Keys as Kubernetes takes them to strings; the `owned` keys refused by name; with
    `label_values`, values as a label's."""
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        r.fail(path, "must be an object of strings")
        return {}
    out = {}
    for k, v in value.items():
        where = key_path(path, k)
        if not isinstance(v, str):
            r.fail(where, f"must be a string (got {v!r}): quote numbers and booleans")
        elif not valid_key(str(k)):
            r.fail(where, "is not a valid key ([prefix/]name, name at most 63 characters)")
        elif owned is not None and owned(str(k)):
            r.fail(where, "owned by the supervisor")
        elif label_values and not valid_label_value(v):
            r.fail(where, LABEL_VALUE_RULE)
        else:
            out[str(k)] = v
    return out


def label_map(doc: Mapping[str, Any], key: str, path: str, r: Reader) -> dict[str, str]:
    """Label keys to label values as Kubernetes takes them (a selector's matchLabels)."""
    return _string_map(doc, key, path, r, label_values=True)


def _annotations(metadata: Mapping[str, Any], r: Reader) -> dict[str, str]:
    path = f"{PATH}.metadata.annotations"
    out = _string_map(metadata, "annotations", path, r, owned=owned_annotation)
    if sum(len(k) + len(v) for k, v in out.items()) > MAX_USER_ANNOTATIONS:
        r.fail(path, f"too large: at most {MAX_USER_ANNOTATIONS} characters in all")
    return out


def _name(settings: Mapping[str, Any], key: str, r: Reader) -> str | None:
    path = f"{PATH}.spec.{key}"
    value = r.string(settings, key, path, None)
    if value is not None and (len(value) > 253 or not _SUBDOMAIN.match(value)):
        r.fail(path, f"must be the name of a Kubernetes object (lower case DNS subdomain, got {value!r})")
        return None
    return value


def _items(
    settings: Mapping[str, Any],
    key: str,
    r: Reader,
    allowed: set[str],
    check: Callable[[Mapping[str, Any], str, Reader], bool],
) -> tuple[Mapping[str, Any], ...]:
    """A list of objects of the `allowed` keys, each checked by `check` (False: left out)."""
    return object_list(settings.get(key), f"{PATH}.spec.{key}", r, allowed, check)


def object_list(
    value: object,
    path: str,
    r: Reader,
    allowed: set[str],
    check: Callable[[Mapping[str, Any], str, Reader], bool],
) -> tuple[Mapping[str, Any], ...]:
    """`value` as a list of objects of the `allowed` keys, each checked by `check` (False: left
    out); () when absent."""
    if value is None:
        return ()
    if not isinstance(value, list):
        r.fail(path, "must be a list")
        return ()
    out = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            r.fail(where, "must be an object")
            continue
        unknown = sorted(set(item) - allowed)
        for name in unknown:
            r.fail(f"{where}.{name}", "unknown field")
        if check(item, where, r) and not unknown:
            out.append(dict(item))
    return tuple(out)


def _toleration(item: Mapping[str, Any], where: str, r: Reader) -> bool:
    ok = True
    for name in ("key", "value"):
        if not isinstance(item.get(name, ""), str):
            r.fail(f"{where}.{name}", f"must be a string (got {item[name]!r})")
            ok = False
    operator = item.get("operator", "Equal")
    if operator not in TOLERATION_OPERATORS:
        r.fail(f"{where}.operator", f"must be Exists or Equal (got {operator!r})")
        ok = False
    elif operator == "Exists" and item.get("value"):
        r.fail(f"{where}.value", "must be empty when operator is Exists")
        ok = False
    elif operator == "Equal" and not item.get("key"):
        r.fail(f"{where}.key", "is needed with operator Equal (Exists without a key tolerates every taint)")
        ok = False
    if item.get("effect", "") not in TAINT_EFFECTS:
        r.fail(
            f"{where}.effect", f"must be NoSchedule, PreferNoSchedule or NoExecute (got {item['effect']!r})"
        )
        ok = False
    seconds = item.get("tolerationSeconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
        r.fail(f"{where}.tolerationSeconds", f"must be an integer (got {seconds!r})")
        ok = False
    elif seconds is not None and item.get("effect") != "NoExecute":
        r.fail(f"{where}.tolerationSeconds", "applies to effect NoExecute only")
        ok = False
    return ok


def _spread(item: Mapping[str, Any], where: str, r: Reader) -> bool:
    ok = True
    skew = item.get("maxSkew")
    if isinstance(skew, bool) or not isinstance(skew, int) or skew < 1:
        r.fail(f"{where}.maxSkew", f"must be an integer of at least 1 (got {skew!r})")
        ok = False
    topology = item.get("topologyKey")
    if not isinstance(topology, str) or not valid_key(topology):
        r.fail(f"{where}.topologyKey", f"must be a node label key (got {topology!r})")
        ok = False
    when = item.get("whenUnsatisfiable")
    if when not in SPREAD_WHEN:
        r.fail(f"{where}.whenUnsatisfiable", f"must be DoNotSchedule or ScheduleAnyway (got {when!r})")
        ok = False
    if "labelSelector" in item and not isinstance(item["labelSelector"], Mapping):
        r.fail(f"{where}.labelSelector", "must be a label selector (matchLabels, matchExpressions)")
        ok = False
    return ok


def _affinity(settings: Mapping[str, Any], r: Reader) -> dict[str, Any]:
    path = f"{PATH}.spec.affinity"
    doc = r.mapping(settings, "affinity", path, AFFINITY_FIELDS)
    out = {}
    for name in sorted(AFFINITY_FIELDS & set(doc)):
        if isinstance(doc[name], Mapping):
            out[name] = dict(doc[name])
        else:
            r.fail(f"{path}.{name}", "must be an object")
    return out


def _pull_secret(item: Mapping[str, Any], where: str, r: Reader) -> bool:
    name = item.get("name")
    if not isinstance(name, str) or not _SUBDOMAIN.match(name):
        r.fail(f"{where}.name", f"must be the name of a Secret (got {name!r})")
        return False
    return True


def _security_context(settings: Mapping[str, Any], r: Reader) -> dict[str, Any]:
    path = f"{PATH}.spec.securityContext"
    doc = r.mapping(settings, "securityContext", path, SECURITY_FIELDS)
    ok = not (set(doc) - SECURITY_FIELDS)
    for name in SECURITY_INTEGERS:
        value = doc.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            r.fail(f"{path}.{name}", f"must be a non-negative integer (got {value!r})")
            ok = False
    if not isinstance(doc.get("runAsNonRoot", False), bool):
        r.fail(f"{path}.runAsNonRoot", f"must be true or false (got {doc['runAsNonRoot']!r})")
        ok = False
    for name in SECURITY_OBJECTS:
        if name in doc and not isinstance(doc[name], Mapping):
            r.fail(f"{path}.{name}", "must be an object")
            ok = False
    for name in ("supplementalGroups", "sysctls"):
        if name in doc and not isinstance(doc[name], list):
            r.fail(f"{path}.{name}", "must be a list")
            ok = False
    return dict(doc) if ok else {}

"""A Kubernetes LabelSelector in a spec (spec.security.clientSelector): checked field by field
as the API server would check it in a NetworkPolicy, so the policy built from it is never
refused at creation; each error names the field and the rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.codec.fields import Reader
from actors.codec.pod_template import LABEL_VALUE_RULE, key_path, valid_key, valid_label_value

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_WITH_VALUES = ("In", "NotIn")
KEY_RULE = "is not a valid label key ([prefix/]name, name at most 63 characters)"


def parse_label_selector(doc: Mapping[str, Any], key: str, path: str, r: Reader) -> dict[str, Any] | None:
    """doc[key] as a LabelSelector (matchLabels, matchExpressions), normalised (empty parts
    left out); None when absent. An empty selector ({}) selects every pod and is kept as {}."""
    value = doc.get(key)
    if value is None:
        return None
    selector = r.mapping(doc, key, path, {"matchLabels", "matchExpressions"})
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Any] = {}
    labels = _match_labels(selector.get("matchLabels"), f"{path}.matchLabels", r)
    if labels:
        out["matchLabels"] = labels
    expressions = _match_expressions(selector.get("matchExpressions"), f"{path}.matchExpressions", r)
    if expressions:
        out["matchExpressions"] = expressions
    return out


def _match_labels(value: object, path: str, r: Reader) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        r.fail(path, "must be an object of label keys to values")
        return {}
    out = {}
    for k, v in value.items():
        where = key_path(path, k)
        if not isinstance(v, str):
            r.fail(where, f"must be a string (got {v!r}): quote numbers and booleans")
        elif not valid_key(str(k)):
            r.fail(where, KEY_RULE)
        elif not valid_label_value(v):
            r.fail(where, LABEL_VALUE_RULE)
        else:
            out[str(k)] = v
    return out


def _match_expressions(value: object, path: str, r: Reader) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        r.fail(path, "must be a list of {key, operator, values}")
        return []
    out = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            r.fail(where, "must be an object {key, operator, values}")
            continue
        for unknown in sorted(set(item) - {"key", "operator", "values"}):
            r.fail(f"{where}.{unknown}", "unknown field")
        expression = _expression(item, where, r)
        if expression is not None:
            out.append(expression)
    return out


def _expression(item: Mapping[str, Any], where: str, r: Reader) -> dict[str, Any] | None:
    label, operator, values = item.get("key"), item.get("operator"), item.get("values")
    ok = True
    if not isinstance(label, str) or not valid_key(label):
        r.fail(f"{where}.key", KEY_RULE)
        ok = False
    if operator not in OPERATORS:
        r.fail(f"{where}.operator", f"must be one of {', '.join(OPERATORS)} (got {operator!r})")
        return None
    if operator in _WITH_VALUES:
        if not isinstance(values, list) or not values:
            r.fail(f"{where}.values", f"must be a non-empty list of label values with {operator}")
            return None
        for j, v in enumerate(values):
            if not isinstance(v, str) or not valid_label_value(v):
                r.fail(f"{where}.values[{j}]", LABEL_VALUE_RULE)
                ok = False
    elif values:
        r.fail(f"{where}.values", f"must be empty with {operator}")
        ok = False
    if not ok:
        return None
    expression: dict[str, Any] = {"key": label, "operator": operator}
    if isinstance(values, list) and values:
        expression["values"] = list(values)
    return expression

"""A Kubernetes LabelSelector in a spec (spec.security.clientSelector): checked field by field
as the API server would check it in a NetworkPolicy, so the policy built from it is never
refused at creation; each error names the field and the rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.codec.fields import Reader
from actors.codec.pod_template import LABEL_VALUE_RULE, label_map, object_list, valid_key, valid_label_value

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
EXPRESSION_FIELDS = {"key", "operator", "values"}
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
    labels = label_map(selector, "matchLabels", f"{path}.matchLabels", r)
    if labels:
        out["matchLabels"] = labels
    expressions = object_list(
        selector.get("matchExpressions"), f"{path}.matchExpressions", r, EXPRESSION_FIELDS, _expression
    )
    if expressions:
        out["matchExpressions"] = list(expressions)
    return out


def _expression(item: Mapping[str, Any], where: str, r: Reader) -> bool:
    """A matchExpressions item as the API server takes it: a label key, an operator, and values
    with In and NotIn only."""
    label, operator, values = item.get("key"), item.get("operator"), item.get("values")
    ok = True
    if not isinstance(label, str) or not valid_key(label):
        r.fail(f"{where}.key", KEY_RULE)
        ok = False
    if operator not in OPERATORS:
        r.fail(f"{where}.operator", f"must be one of {', '.join(OPERATORS)} (got {operator!r})")
        return False
    if operator in _WITH_VALUES:
        if not isinstance(values, list) or not values:
            r.fail(f"{where}.values", f"must be a non-empty list of label values with {operator}")
            return False
        for j, v in enumerate(values):
            if not isinstance(v, str) or not valid_label_value(v):
                r.fail(f"{where}.values[{j}]", LABEL_VALUE_RULE)
                ok = False
    elif values:
        r.fail(f"{where}.values", f"must be empty with {operator}")
        ok = False
    return ok

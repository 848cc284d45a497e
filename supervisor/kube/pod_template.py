"""spec.podTemplate merged into the pods the operator makes (pure: dicts in, new dicts out).

Member pods take all of it. The codec has refused every label and annotation the supervisor
owns (actors/pod_template.py), so labels and annotations are a plain union. How placement
combines with the supervisor's own:

- affinity: the user's nodeAffinity and podAffinity as given (the supervisor sets none); the
  user's podAntiAffinity terms are added to the supervisor's (it prefers members on different
  hosts, weight 100), so a required anti-affinity of the user's makes spreading a rule while
  the preference stays;
- topologySpreadConstraints: the user's, and the supervisor's (members spread over zones,
  ScheduleAnyway) for every topologyKey the user does not constrain: a user's constraint on a
  key replaces the supervisor's on that key (Kubernetes refuses two on the same key and rule);
- securityContext: the user's fields over the supervisor's (its fsGroup for bitnami/etcd);
- tolerations, nodeSelector, priorityClassName, imagePullSecrets, runtimeClassName: the user's.

Verify and restore pods (snapshot_pods.py) take what decides where and how a pod may run, so
they run where members run (a restore pod is its seed claim's first user: where it is placed
is where the volume is, with WaitForFirstConsumer): tolerations, nodeSelector, the node part of
affinity, priorityClassName, imagePullSecrets, runtimeClassName and securityContext. Not the
labels and annotations, nor pod (anti-)affinity and spreading, which are about members.
"""

from __future__ import annotations

import copy
from typing import Any

from actors.model import PodTemplate

Obj = dict[str, Any]


def merge_member_pod(pod: Obj, template: PodTemplate) -> Obj:
    """`pod` (a member pod as manifests.member_pod builds it) with the template merged in."""
    out = copy.deepcopy(pod)
    if not template.is_set:
        return out
    meta, spec = out["metadata"], out["spec"]
    meta["labels"] = {**template.metadata.labels, **meta.get("labels", {})}
    annotations = {**template.metadata.annotations, **meta.get("annotations", {})}
    if annotations:
        meta["annotations"] = annotations
    user = template.spec
    _place(spec, template)
    if user.affinity.get("podAffinity"):
        spec.setdefault("affinity", {})["podAffinity"] = copy.deepcopy(dict(user.affinity["podAffinity"]))
    if user.affinity.get("podAntiAffinity"):
        ours = spec.setdefault("affinity", {}).setdefault("podAntiAffinity", {})
        for rule, terms in user.affinity["podAntiAffinity"].items():
            ours[rule] = [*ours.get(rule, []), *copy.deepcopy(list(terms))]
    if user.topology_spread_constraints:
        theirs = [copy.deepcopy(dict(c)) for c in user.topology_spread_constraints]
        named = {c.get("topologyKey") for c in theirs}
        kept = [c for c in spec.get("topologySpreadConstraints", []) if c.get("topologyKey") not in named]
        spec["topologySpreadConstraints"] = kept + theirs
    return out


def merge_snapshot_pod(pod: Obj, template: PodTemplate) -> Obj:
    """`pod` (a verify or restore pod) with the template's placement and pod-level settings."""
    out = copy.deepcopy(pod)
    if template.is_set:
        _place(out["spec"], template)
    return out


def _place(spec: Obj, template: PodTemplate) -> None:
    """What every pod of the cluster takes: where it may be scheduled and how it runs."""
    user = template.spec
    if user.tolerations:
        spec["tolerations"] = [
            *spec.get("tolerations", []),
            *(copy.deepcopy(dict(t)) for t in user.tolerations),
        ]
    if user.node_selector:
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **user.node_selector}
    if user.affinity.get("nodeAffinity"):
        spec.setdefault("affinity", {})["nodeAffinity"] = copy.deepcopy(dict(user.affinity["nodeAffinity"]))
    if user.priority_class_name:
        spec["priorityClassName"] = user.priority_class_name
    if user.runtime_class_name:
        spec["runtimeClassName"] = user.runtime_class_name
    if user.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in user.image_pull_secrets]
    if user.security_context:
        spec["securityContext"] = {
            **spec.get("securityContext", {}),
            **copy.deepcopy(dict(user.security_context)),
        }

"""Whole documents: an EtcdCluster or EtcdBackup object (apiVersion, kind, metadata, spec), and
multi-document YAML files of them, each document's errors reported with its position."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from actors.codec.fields import (
    MAX_NAME_LENGTH,
    NAME_PATTERN,
    DocumentError,
    InvalidCluster,
    InvalidDocument,
    Reader,
    SpecError,
)
from actors.codec.spec import parse_spec
from actors.codec.status import backup_status_from_dict
from actors.codec.stores import BACKUP_NAME_PATTERN, parse_store
from actors.model import (
    API_GROUP,
    API_VERSION,
    BACKUP_KIND,
    KIND,
    ROTATE_CA_ANNOTATION,
    SUSPEND_ANNOTATION,
    ClusterRef,
    ClusterResource,
    EtcdBackup,
    EtcdBackupSpec,
    EtcdBackupStatus,
)


def parse_cluster(doc: Any, *, default_namespace: str = "default") -> ClusterResource:
    """One EtcdCluster object (as YAML/JSON decoded) -> ClusterResource, or InvalidCluster."""
    r = Reader()
    if not isinstance(doc, Mapping):
        raise InvalidCluster((SpecError("(document)", "must be an EtcdCluster object"),))
    meta = _header(doc, KIND, r)
    name = meta.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or len(name) > MAX_NAME_LENGTH:
        r.fail(
            "metadata.name",
            f"must be a DNS label of at most {MAX_NAME_LENGTH} characters (got {name!r})",
        )
        name = ""
    namespace = meta.get("namespace") or default_namespace
    spec_doc = doc.get("spec") or {}
    if not isinstance(spec_doc, Mapping):
        r.fail("spec", "must be an object")
        spec_doc = {}
    spec = parse_spec(spec_doc, r)
    rotate_ca = _annotation(meta, ROTATE_CA_ANNOTATION, r)
    suspended = _annotation(meta, SUSPEND_ANNOTATION, r)
    if suspended not in ("", "true", "false"):
        r.fail(f"metadata.annotations.{SUSPEND_ANNOTATION}", f'must be "true" or "false" (got {suspended!r})')
    if r.errors:
        raise InvalidCluster(tuple(r.errors))
    generation = meta.get("generation", 1)
    return ClusterResource(
        ref=ClusterRef(namespace=str(namespace), name=name),
        spec=spec,
        generation=generation if isinstance(generation, int) else 1,
        uid=str(meta.get("uid", "")),
        recorded_members=_recorded_members(doc.get("status")),
        rotate_ca=rotate_ca,
        suspended=suspended == "true",
        recorded_phase=_recorded_phase(doc.get("status")),
    )


def _annotation(meta: Mapping[str, Any], key: str, r: Reader) -> str:
    annotations = meta.get("annotations") or {}
    value = annotations.get(key, "") if isinstance(annotations, Mapping) else ""
    if not isinstance(value, str):
        r.fail(f"metadata.annotations.{key}", f"must be a string (got {value!r})")
        return ""
    return value


def _recorded_phase(status: Any) -> str:
    """status.phase as written ("" when there is none, or it is not a string: it is ours)."""
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return phase if isinstance(phase, str) else ""


def _recorded_members(status: Any) -> tuple[str, ...]:
    """The member names a status lists; nothing from a status that is not one (it is ours to
    write, so a malformed one is ignored rather than refused)."""
    members = status.get("members") if isinstance(status, Mapping) else None
    if not isinstance(members, list):
        return ()
    names = (m.get("name") for m in members if isinstance(m, Mapping))
    return tuple(sorted(n for n in names if isinstance(n, str) and n))


def _header(doc: Mapping[str, Any], kind: str, r: Reader) -> Mapping[str, Any]:
    """Check apiVersion and kind; the metadata ({} when it is not an object)."""
    expected_api = f"{API_GROUP}/{API_VERSION}"
    if doc.get("apiVersion") != expected_api:
        r.fail("apiVersion", f"must be {expected_api} (got {doc.get('apiVersion')!r})")
    if doc.get("kind") != kind:
        r.fail("kind", f"must be {kind} (got {doc.get('kind')!r})")
    raw_meta = doc.get("metadata")
    return raw_meta if isinstance(raw_meta, Mapping) else {}


def parse_cluster_documents(text: str) -> list[ClusterResource | DocumentError]:
    """A multi-document YAML file of EtcdClusters -> one entry per non-empty document, in order."""
    return [d for d in parse_documents(text) if not isinstance(d, EtcdBackup)]


def parse_documents(text: str) -> list[ClusterResource | EtcdBackup | DocumentError]:
    """A multi-document YAML file -> one entry per non-empty document, in order: EtcdBackup
    documents (by their kind) become EtcdBackups, every other one an EtcdCluster."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        return [DocumentError(0, "", (SpecError("(file)", f"is not valid YAML: {exc}"),))]
    out: list[ClusterResource | EtcdBackup | DocumentError] = []
    for index, doc in enumerate(docs):
        kind = doc.get("kind") if isinstance(doc, Mapping) else None
        try:
            out.append(parse_etcd_backup(doc) if kind == BACKUP_KIND else parse_cluster(doc))
        except InvalidDocument as exc:
            meta = doc.get("metadata") if isinstance(doc, Mapping) else None
            name = ""
            if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
                name = f"{meta.get('namespace') or 'default'}/{meta['name']}"
            out.append(DocumentError(index, name, exc.errors, kind if kind == BACKUP_KIND else KIND))
    return out


class InvalidBackup(InvalidDocument):
    pass


def parse_etcd_backup(doc: Any, *, default_namespace: str = "default") -> EtcdBackup:
    """One EtcdBackup object -> EtcdBackup (its status too, when it has one), or InvalidBackup."""
    r = Reader()
    if not isinstance(doc, Mapping):
        raise InvalidBackup((SpecError("(document)", "must be an EtcdBackup object"),))
    meta = _header(doc, BACKUP_KIND, r)
    name = meta.get("name")
    if not isinstance(name, str) or not BACKUP_NAME_PATTERN.match(name):
        r.fail(
            "metadata.name", f"must be a DNS subdomain: lowercase letters, digits, '-' and '.' (got {name!r})"
        )
        name = ""
    spec_doc = r.mapping(doc, "spec", "spec", {"clusterName", "store"})
    cluster_name = r.string(spec_doc, "clusterName", "spec.clusterName", None)
    if cluster_name is None:
        r.fail("spec.clusterName", "required: the EtcdCluster (in the same namespace) to back up")
    elif not NAME_PATTERN.match(cluster_name):
        r.fail("spec.clusterName", f"must be an EtcdCluster's name, a DNS label (got {cluster_name!r})")
    store = parse_store(spec_doc["store"], "spec.store", r) if spec_doc.get("store") is not None else None
    if r.errors:
        raise InvalidBackup(tuple(r.errors))
    raw_status = doc.get("status")
    return EtcdBackup(
        namespace=str(meta.get("namespace") or default_namespace),
        name=name,
        spec=EtcdBackupSpec(cluster_name=cluster_name or "", store=store),
        status=backup_status_from_dict(raw_status) if isinstance(raw_status, Mapping) else EtcdBackupStatus(),
        uid=str(meta.get("uid", "")),
    )

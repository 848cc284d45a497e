"""What every reading of a document shares: the field rules (patterns the CRD's CEL has too),
the errors that name a field and a rule, and the Reader that collects them all instead of
stopping at the first."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from attrs import frozen

from actors.model import KIND

# The same rules as the CRD's CEL (tests/unit/test_codec.py keeps them identical): a release
# or pre-release version without a leading "v", and a repository without tag or digest.
VERSION_PATTERN = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$")
REPOSITORY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$")
# A Kubernetes quantity that makes sense for a volume: positive, with an optional binary or
# decimal suffix (e.g. 10Gi, 500M, 1073741824).
QUANTITY_PATTERN = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
# Member names are <cluster>-<ordinal> and become DNS labels, which cap at 63 characters.
NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
MAX_NAME_LENGTH = 50
# A Secret's name (a DNS subdomain); locally also the name of a file or directory next to the
# manifest, so never a path.
SECRET_NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# An etcd member's client URL as spec.adopt.endpoints takes it (the CRD's CEL has the same
# pattern): http or https, a host (a DNS name, IPv4 or a bracketed IPv6 address) and a port
# from 1 to 65535, nothing after it.
CLIENT_URL_PATTERN = re.compile(
    r"^(http|https)://(\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9]([-A-Za-z0-9.]{0,251}[A-Za-z0-9])?)"
    r":(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})$"
)


@frozen
class SpecError:
    """One broken rule: where (a dotted path) and which rule."""

    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}"


@frozen
class DocumentError:
    """A document that could not become a ClusterResource, and every reason why."""

    index: int  # position in a multi-document file, from 0
    name: str  # namespace/name when the metadata was readable, else ""
    errors: tuple[SpecError, ...]
    kind: str = KIND  # EtcdBackup when the document said so, else taken for an EtcdCluster

    def __str__(self) -> str:
        where = f"document {self.index}" + (f" ({self.name})" if self.name else "")
        return f"{where}: " + "; ".join(str(e) for e in self.errors)


class InvalidDocument(ValueError):
    """A document that breaks rules: every one of them, by field."""

    def __init__(self, errors: tuple[SpecError, ...]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


class InvalidCluster(InvalidDocument):
    pass


class Reader:
    """Walks a document, collecting errors instead of stopping at the first."""

    def __init__(self) -> None:
        self.errors: list[SpecError] = []

    def fail(self, field: str, rule: str) -> None:
        self.errors.append(SpecError(field, rule))

    def mapping(self, doc: Mapping[str, Any], key: str, path: str, allowed: set[str]) -> Mapping[str, Any]:
        value = doc.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(path, "must be an object")
            return {}
        for unknown in sorted(set(value) - allowed):
            self.fail(f"{path}.{unknown}", "unknown field")
        return value

    def string(self, doc: Mapping[str, Any], key: str, path: str, default: str | None) -> str | None:
        value = doc.get(key, default)
        if value is None or isinstance(value, str):
            return value
        self.fail(path, f"must be a string (got {value!r})")
        return default

    def boolean(self, doc: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        value = doc.get(key, default)
        if isinstance(value, bool):
            return value
        self.fail(path, f"must be true or false (got {value!r})")
        return default

    def string_map(self, doc: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
        value = doc.get(key) or {}
        if not isinstance(value, Mapping):
            self.fail(path, "must be an object of strings")
            return {}
        out = {}
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, str | int | float):
                self.fail(f"{path}.{k}", f"must be a quantity string (got {v!r})")
            else:
                out[str(k)] = str(v)
        return out


def secret_name(doc: Mapping[str, Any], key: str, path: str, r: Reader) -> str | None:
    """The name of a Secret at doc[key] (None when absent), or a named error."""
    name = r.string(doc, key, path, None)
    if name is not None and not SECRET_NAME_PATTERN.match(name):
        r.fail(path, f"must be a Secret name (a DNS subdomain) (got {name!r})")
    return name

"""What one read of the manifest file asks for, and whether it can be trusted to tear anything down.

Pure: no trio, no fleet. supervisor/local/follow.py acts on it.

A read is one of:
- FileProblem: unreadable, not YAML, or no document at all (an editor's truncate-then-write
  looks exactly like that for a moment). Nothing may change because of it.
- Manifest: every document parsed. Valid ones can be applied, invalid ones named by
  namespace/name are reported on that cluster; a document that names no cluster at all makes
  the read unfit for removals (it may be the very cluster another read would remove).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import yaml
from attrs import define, field, frozen

from actors.codec import NAME_PATTERN, DocumentError, parse_documents
from actors.model import BACKUP_KIND, ClusterRef, ClusterResource, EtcdBackup
from supervisor.local.manifest import Unreadable

# A Kubernetes namespace: an RFC 1123 label.
NAMESPACE_PATTERN = re.compile(r"^(?=.{1,63}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAMESPACE_RULE = "must be a DNS label: lowercase letters, digits and '-', at most 63 characters"
EMPTY = "no EtcdCluster document in it (taken for a save in progress; stop the daemon to stop every cluster)"


@frozen
class FileProblem:
    """The file as a whole cannot be used; why, naming the line where YAML says it."""

    reason: str


@frozen
class Manifest:
    resources: tuple[ClusterResource, ...]
    invalid: Mapping[ClusterRef, str]  # documents naming their cluster, but invalid: the rules broken
    unnamed: tuple[str, ...]  # documents naming no usable cluster: what is wrong with each
    backups: tuple[EtcdBackup, ...] = ()  # on-demand backups (EtcdBackup documents)
    invalid_backups: tuple[str, ...] = ()  # EtcdBackup documents that break a rule: which and why

    def names(self) -> set[ClusterRef]:
        return {r.ref for r in self.resources} | set(self.invalid)


def read_clusters(read: str | Unreadable) -> Manifest | FileProblem:
    if isinstance(read, Unreadable):
        return FileProblem(read.reason)
    try:
        # A list: the loader is lazy, and a later document's syntax error must be seen here.
        if all(doc is None for doc in list(yaml.safe_load_all(read))):
            return FileProblem(EMPTY)
    except yaml.YAMLError as exc:
        return FileProblem(yaml_problem(exc, read))
    parsed = parse_documents(read)
    invalid: dict[ClusterRef, str] = {}
    unnamed: list[str] = []
    errors = [p for p in parsed if isinstance(p, DocumentError)]
    # An EtcdBackup document can never be a cluster's: it does not hold removals back.
    invalid_backups = tuple(f"EtcdBackup {e}" for e in errors if e.kind == BACKUP_KIND)
    backups = tuple(p for p in parsed if isinstance(p, EtcdBackup) and _usable_namespace(p.namespace))
    for error in (e for e in errors if e.kind != BACKUP_KIND):
        ref = _named(error)
        if ref is None:
            unnamed.append(str(error))
        else:
            invalid[ref] = "; ".join(str(e) for e in error.errors)
    resources = []
    for resource in (p for p in parsed if isinstance(p, ClusterResource)):
        if _usable_namespace(resource.ref.namespace):
            resources.append(resource)
        else:  # the codec leaves namespaces to Kubernetes; here it names a directory
            ns = resource.ref.namespace
            unnamed.append(
                f"document ({resource.ref.name}): metadata.namespace: {NAMESPACE_RULE} (got {ns!r})"
            )
    bad_namespaces = tuple(
        f"EtcdBackup {b}: metadata.namespace: {NAMESPACE_RULE}" for b in parsed
        if isinstance(b, EtcdBackup) and not _usable_namespace(b.namespace)
    )  # fmt: skip
    return Manifest(tuple(resources), invalid, tuple(unnamed), backups, invalid_backups + bad_namespaces)


def _usable_namespace(namespace: str) -> bool:
    return bool(NAMESPACE_PATTERN.match(namespace))


def yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """One line naming where: PyYAML's own message spans several, with the file's excerpt."""
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow, by offset
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        return f"not valid YAML: line {line}, column {column}: character #x{exc.character:04x} is not allowed"
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or problem is None:
        return "not valid YAML: " + " ".join(str(exc).split())
    context = getattr(exc, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    return f"not valid YAML: {where}: {problem}" + (f" ({context})" if context else "")


def _named(error: DocumentError) -> ClusterRef | None:
    # Only a name that can be a cluster's: it becomes a directory under the state dir.
    namespace, _, name = error.name.partition("/")
    if NAMESPACE_PATTERN.match(namespace) and NAME_PATTERN.match(name):
        return ClusterRef(namespace, name)
    return None


@define
class Removals:
    """Clusters that complete reads lack, and since when.

    A cluster goes only when two complete reads at least `confirm_after` apart both lack it: a
    file caught half-written lacks the clusters below the cut, and the next poll sees them again.
    """

    confirm_after: float
    _since: dict[ClusterRef, float] = field(factory=dict)

    def due(self, lacking: set[ClusterRef], now: float) -> set[ClusterRef]:
        """Note a complete read that lacks `lacking`; the clusters now confirmed gone."""
        self._since = {ref: self._since.get(ref, now) for ref in lacking}
        return {ref for ref, since in self._since.items() if now - since >= self.confirm_after}

    def hold(self) -> None:
        """A read that could not be trusted: start counting again from the next complete one."""
        self._since.clear()

    def next_check(self) -> float | None:
        """When a confirming read is due, if any removal is pending."""
        return min(self._since.values()) + self.confirm_after if self._since else None

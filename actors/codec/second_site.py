"""spec.backup.copyTo (a second store) and spec.backup.immutable (locked objects), with their rules.

Immutability is refused at admission for a store that cannot lock: a backup the user believes
locked but is not would be found out only when an attacker deletes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.codec.fields import Reader
from actors.codec.stores import parse_store
from actors.model import CopySpec, ImmutableSpec, StoreSpec

# Store kinds whose objects this supervisor can lock: S3 object lock. Azure's immutability
# policies are not wired (Azurite does not implement them, so they could not be tested), nor is
# GCS's object retention; a local directory has no such thing.
LOCKING_KINDS = ("s3",)
# S3 object lock allows up to 100 years; more is a typo, not a policy.
MAX_LOCK_DAYS = 36500


def parse_copy_to(doc: Mapping[str, Any], primary: StoreSpec | None, r: Reader) -> CopySpec | None:
    if doc.get("copyTo") is None:
        return None
    fields = r.mapping(doc, "copyTo", "spec.backup.copyTo", {"store"})
    if fields.get("store") is None:
        r.fail("spec.backup.copyTo.store", "required: the second store every backup is copied to")
        return None
    store = parse_store(fields["store"], "spec.backup.copyTo.store", r)
    if store is None:
        return None
    if store == primary:
        r.fail(
            "spec.backup.copyTo.store",
            "must be another store than spec.backup.store (a copy in the same place)",
        )
        return None
    return CopySpec(store=store)


def parse_immutable(
    doc: Mapping[str, Any], stores: Mapping[str, StoreSpec | None], r: Reader
) -> ImmutableSpec | None:
    """`stores`: where backups are written (spec.backup.store, spec.backup.copyTo.store), each
    of which must be able to lock."""
    if doc.get("immutable") is None:
        return None
    fields = r.mapping(doc, "immutable", "spec.backup.immutable", {"days"})
    days = fields.get("days")
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_LOCK_DAYS:
        r.fail(
            "spec.backup.immutable.days",
            f"must be a whole number of days from 1 to {MAX_LOCK_DAYS} (got {days!r})",
        )
        return None
    refused = False
    for path, store in stores.items():
        kind = _kind(store)
        if kind is not None and kind not in LOCKING_KINDS:
            r.fail(
                "spec.backup.immutable",
                f"{path} ({kind}) cannot lock objects: immutable needs an s3 store"
                " whose bucket has object lock enabled",
            )
            refused = True
    return None if refused else ImmutableSpec(days=days)


def _kind(store: StoreSpec | None) -> str | None:
    if store is None:
        return None
    return next(k for k in ("local", "s3", "gcs", "azure") if getattr(store, k) is not None)

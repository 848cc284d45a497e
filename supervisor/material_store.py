"""The CertificateStore methods that change a cluster's CA material, once for both stores.

Each is one change of supervisor/ca_material.py applied by the store's own `_change` (files
replaced by rename locally, one compare-and-swap update of the Secret on Kubernetes)."""

from __future__ import annotations

import abc
import datetime as dt
from collections.abc import Callable, Sequence
from functools import partial

from actors.certificates import RotationRecord
from actors.model import ClusterRef
from supervisor import ca_material

Change = Callable[[ca_material.Material], ca_material.Material]


class MaterialStore(abc.ABC):
    async def renew(self, cluster: ClusterRef, names: Sequence[str], lifetime: float) -> None:
        change = partial(ca_material.renewed, names=tuple(names), now=_now(), lifetime=lifetime)
        await self._change(cluster, change, f"cannot renew {', '.join(names)}")

    async def begin_ca_rotation(
        self, cluster: ClusterRef, ca_lifetime: float, record: RotationRecord
    ) -> None:
        change = partial(ca_material.begun, now=_now(), lifetime=ca_lifetime)
        await self._change(cluster, change, "cannot add a new CA", record=record)

    async def switch_ca(self, cluster: ClusterRef, lifetime: float) -> None:
        change = partial(ca_material.switched, now=_now(), lifetime=lifetime)
        await self._change(cluster, change, "cannot switch to the new CA")

    async def drop_old_ca(self, cluster: ClusterRef) -> None:
        await self._change(cluster, ca_material.dropped, "cannot drop the old CA")

    @abc.abstractmethod
    async def _change(
        self, cluster: ClusterRef, change: Change, what: str, *, record: RotationRecord | None = None
    ) -> None:
        """Apply `change` to the cluster's material (and keep `record`), or CertificatesRefused
        saying `what` failed."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)

"""S3 PutObjectRetention (and the delete of a version it could not lock), through botocore.

obstore cannot lock an object after it is written: its client sends the same headers on every
request of a multipart upload, and S3's API takes the lock headers on PutObject,
CreateMultipartUpload and CopyObject only (not on UploadPart or CompleteMultipartUpload). So a
locked store uploads a big object in parts without them and then sets its retention here, on the
version the upload made, with the store's own endpoint, region and credentials. Blocking calls:
the caller runs them in a worker thread.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import botocore.config
import botocore.exceptions
import botocore.session

from actors.errors import StoreAccessDenied, StoreError, StoreUnavailable
from actors.model import S3Store as S3Spec
from actors.store_port import S3Credentials, StoreCredentials
from supervisor.stores.cloud import NO_OBJECT_LOCK

WHY = "spec.backup.immutable"


class S3Retention:
    """Locks (COMPLIANCE) or deletes one version of an object in `store`'s bucket, under its
    prefix. The botocore client is made on first use (it loads S3's API model: ~100 ms)."""

    def __init__(
        self,
        store: S3Spec,
        credentials: StoreCredentials,
        *,
        connect_timeout: float,
        request_timeout: float,
        retries: int,
    ) -> None:
        self._store = store
        self._credentials = credentials
        self._config = botocore.config.Config(
            region_name=store.region or "us-east-1",
            connect_timeout=connect_timeout,
            read_timeout=request_timeout,
            retries={"max_attempts": retries + 1, "mode": "standard"},
            # S3-compatible servers (moto, MinIO) answer on paths, as the obstore client is told.
            s3={"addressing_style": "path"} if store.endpoint else None,
        )
        self._client: Any = None
        self._made = threading.Lock()

    def lock(self, key: str, version: str | None, until: float) -> None:
        """Retention COMPLIANCE until `until` (unix seconds) on `version` of `key` (the current
        version when None). StoreError naming spec.backup.immutable when S3 refuses."""
        date = datetime.fromtimestamp(until, tz=UTC)
        self._call(
            "lock",
            key,
            "put_object_retention",
            Retention={"Mode": "COMPLIANCE", "RetainUntilDate": date},
            **_version(version),
        )

    def discard(self, key: str, version: str | None) -> None:
        """Delete `version` of `key` for good (a version not locked can be)."""
        self._call("delete", key, "delete_object", **_version(version))

    def _call(self, what: str, key: str, operation: str, **kwargs: Any) -> None:
        prefix = self._store.prefix.strip("/")
        full = f"{prefix}/{key}" if prefix else key
        try:
            getattr(self._s3(), operation)(Bucket=self._store.bucket, Key=full, **kwargs)
        except botocore.exceptions.ClientError as exc:
            raise _translate(f"{self._store.describe()}: {what} {key!r}", exc) from exc
        except botocore.exceptions.BotoCoreError as exc:  # no answer: connection, timeout
            raise StoreUnavailable(
                f"{self._store.describe()}: {what} {key!r} ({WHY}): the endpoint did not answer ({exc})"
            ) from exc

    def _s3(self) -> Any:
        with self._made:
            if self._client is None:
                keys: dict[str, str] = {}
                if isinstance(self._credentials, S3Credentials):
                    keys = {
                        "aws_access_key_id": self._credentials.access_key_id,
                        "aws_secret_access_key": self._credentials.secret_access_key,
                    }
                # No credentials: botocore's own chain (environment, web identity, instance role).
                self._client = botocore.session.get_session().create_client(
                    "s3", endpoint_url=self._store.endpoint or None, config=self._config, **keys
                )
            return self._client


def _version(version: str | None) -> dict[str, str]:
    return {"VersionId": version} if version else {}


def _translate(what: str, exc: botocore.exceptions.ClientError) -> StoreError:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    detail = f"{code}: {error.get('Message', exc)}"
    if "ObjectLockConfiguration" in detail or "Object Lock Configuration" in detail:
        return StoreError(f"{what}: {NO_OBJECT_LOCK} ({detail})")
    if status in (401, 403) or code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return StoreAccessDenied(f"{what} ({WHY}): the store refused the credentials ({detail})")
    if status >= 500:
        return StoreUnavailable(f"{what} ({WHY}): the endpoint did not answer ({detail})")
    return StoreError(f"{what} ({WHY}): {detail}")

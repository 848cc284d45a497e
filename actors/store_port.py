"""The object-store port: where backups go (a local directory, S3-compatible, GCS).

Pure: Protocol and attrs records only. Adapters live in supervisor.stores (open_store builds one
from a StoreSpec); errors are the StoreError family in actors.errors, so the actors can tell a
missing bucket from wrong credentials, an unreachable endpoint or a full disk.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Protocol

from attrs import field, frozen

from actors.errors import StoreAccessDenied

# The keys of a credentials Secret (on Kubernetes) or file (locally), as REQUIREMENTS.md fixes them.
S3_CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
GCS_CREDENTIAL_KEY = "service-account.json"
# Azure Blob's shared key, under the names Azure's own tools read from the environment.
AZURE_CREDENTIAL_KEYS = ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_KEY")


@frozen
class StoredObject:
    """What a put wrote: the key, its size in bytes and the sha256 (hex) of exactly those bytes.

    A store that encodes what it is given (actors/backup/encoded_store.py: compression,
    encryption) says so: `content_size`/`content_sha256` are those of the bytes it was given
    (None: the same as the stored ones), `compression` and `key_id` (hex; None: not encrypted)
    how they were encoded. `retain_until` (unix seconds): the store locked the object until
    then (S3 object lock); None: it may be deleted at any time."""

    key: str
    size: int
    sha256: str
    content_size: int | None = None
    content_sha256: str | None = None
    compression: str = "none"
    key_id: str | None = None
    retain_until: float | None = None

    @property
    def content(self) -> tuple[int, str]:
        """Size and sha256 of the bytes the put was given, before any encoding."""
        if self.content_size is None or self.content_sha256 is None:
            return self.size, self.sha256
        return self.content_size, self.content_sha256


@frozen
class ObjectInfo:
    """One object as a listing reports it."""

    key: str
    size: int
    modified: float  # unix seconds


@frozen
class S3Credentials:
    access_key_id: str
    secret_access_key: str = field(repr=False)


@frozen
class GcsCredentials:
    # The content of a service-account key file (JSON), never a path: it may come from a Secret.
    service_account_json: str = field(repr=False)


@frozen
class AzureCredentials:
    account_name: str
    account_key: str = field(repr=False)


def azure_credentials_from(values: Mapping[str, str], where: str) -> AzureCredentials:
    """Azure credentials from a Secret's or a file's keys (StoreAccessDenied as below)."""
    name, key = _required(values, AZURE_CREDENTIAL_KEYS, where)
    return AzureCredentials(account_name=name, account_key=key)


def s3_credentials_from(values: Mapping[str, str], where: str) -> S3Credentials:
    """S3 credentials from a Secret's or a file's keys; StoreAccessDenied naming `where` and a missing key."""
    key_id, secret = _required(values, S3_CREDENTIAL_KEYS, where)
    return S3Credentials(access_key_id=key_id, secret_access_key=secret)


def _required(values: Mapping[str, str], keys: tuple[str, ...], where: str) -> list[str]:
    missing = [k for k in keys if not values.get(k)]
    if missing:
        raise StoreAccessDenied(f"{where}: {', '.join(missing)} missing")
    return [values[k] for k in keys]


# None: no credentials configured, the store's client looks in its own environment (IAM roles,
# workload identity, metadata servers).
StoreCredentials = S3Credentials | GcsCredentials | AzureCredentials | None


class ObjectStore(Protocol):
    """A flat namespace of keys ("etcd/demo/2026-...db") under the store's own prefix.

    Keys are relative: "a/b.db", never "/a" nor containing "..". Every failure is a
    StoreError (actors.errors) whose message names the store and the operation.
    """

    async def put_stream(self, key: str, chunks: AsyncIterable[bytes]) -> StoredObject:
        """Write the chunks as one object, atomically: readers see the whole object or none.

        Streams (multipart where the store has it): memory stays bounded by a few parts, never
        the object. The sha256 is computed on the way through.
        """
        ...

    async def put_bytes(self, key: str, data: bytes) -> StoredObject:
        """Write a small object (metadata) in one request."""
        ...

    def get_stream(self, key: str) -> AsyncIterator[bytes]:
        """The object's bytes in chunks, as they arrive (an async generator)."""
        ...

    async def get_bytes(self, key: str) -> bytes:
        """A small object, whole."""
        ...

    async def list(self, prefix: str) -> list[ObjectInfo]:
        """Every object whose key starts with `prefix` (a plain string prefix; "" for all)."""
        ...

    async def delete(self, key: str) -> None:
        """Delete the object; deleting one that is not there is not an error."""
        ...

    async def aclose(self) -> None:
        """Release connections; whoever opened the store closes it."""
        ...

"""Credentials in local mode: the daemon's environment, or a file next to the manifest.

A store naming `credentialsSecret: s3-creds` is read from `<manifest dir>/s3-creds` (KEY=VALUE
lines: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; for Azure AZURE_STORAGE_ACCOUNT_NAME,
AZURE_STORAGE_ACCOUNT_KEY) or, for GCS, `<manifest dir>/gcs-creds.json`
(a service-account key) when that file exists; otherwise from the standard environment
variables (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, GOOGLE_APPLICATION_CREDENTIALS).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from actors.errors import StoreAccessDenied
from actors.model import AzureStore, GcsStore, S3Store, StoreSpec
from actors.store_port import (
    AZURE_CREDENTIAL_KEYS,
    S3_CREDENTIAL_KEYS,
    GcsCredentials,
    StoreCredentials,
    azure_credentials_from,
    s3_credentials_from,
)

S3_KEYS = S3_CREDENTIAL_KEYS


def local_credentials(spec: StoreSpec, manifest_dir: Path, environ: Mapping[str, str]) -> StoreCredentials:
    """The credentials for `spec`; None when none are configured (the client's own lookup then).

    StoreAccessDenied when a named secret can be found nowhere, or a file lacks a key.
    """
    store = spec.chosen
    if isinstance(store, S3Store):
        return _s3(store, manifest_dir, environ)
    if isinstance(store, GcsStore):
        return _gcs(store, manifest_dir, environ)
    if isinstance(store, AzureStore):
        return _key_file(store, manifest_dir, environ, AZURE_CREDENTIAL_KEYS, azure_credentials_from)
    return None


def _s3(store: S3Store, manifest_dir: Path, environ: Mapping[str, str]) -> StoreCredentials:
    return _key_file(store, manifest_dir, environ, S3_KEYS, s3_credentials_from)


def _key_file(
    store: S3Store | AzureStore,
    manifest_dir: Path,
    environ: Mapping[str, str],
    keys: tuple[str, ...],
    parse: Callable[[Mapping[str, str], str], StoreCredentials],
) -> StoreCredentials:
    """KEY=VALUE credentials: the named file next to the manifest, else the environment."""
    secret = store.credentials_secret
    if secret and (manifest_dir / secret).is_file():
        path = manifest_dir / secret
        return parse(parse_key_values(path.read_text()), f"{store.describe()}: {path}")
    if all(environ.get(k) for k in keys):
        return parse(environ, "the environment")
    if secret:
        raise StoreAccessDenied(
            f"{store.describe()}: credentialsSecret {secret!r}: no file {manifest_dir / secret} "
            f"and no {' / '.join(keys)} in the environment"
        )
    return None


def _gcs(store: GcsStore, manifest_dir: Path, environ: Mapping[str, str]) -> StoreCredentials:
    secret = store.credentials_secret
    if secret and (manifest_dir / f"{secret}.json").is_file():
        return GcsCredentials((manifest_dir / f"{secret}.json").read_text())
    if environ.get("GOOGLE_APPLICATION_CREDENTIALS"):
        path = Path(environ["GOOGLE_APPLICATION_CREDENTIALS"])
        try:
            return GcsCredentials(path.read_text())
        except OSError as exc:
            raise StoreAccessDenied(
                f"{store.describe()}: GOOGLE_APPLICATION_CREDENTIALS {path}: {exc}"
            ) from exc
    if secret:
        raise StoreAccessDenied(
            f"{store.describe()}: credentialsSecret {secret!r}: no file {manifest_dir / secret}.json "
            "and no GOOGLE_APPLICATION_CREDENTIALS in the environment"
        )
    return None


def parse_key_values(text: str) -> dict[str, str]:
    """KEY=VALUE lines (blank lines, # comments and an `export ` in front allowed)."""
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        values[key.strip()] = value.strip().strip("'\"")
    return values

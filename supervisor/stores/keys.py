"""Keys are relative paths: the same rule for every store, so a key valid on one is valid on all."""

from __future__ import annotations

# A local store writes through a temporary file of this name before the rename; keys may not
# use it, so a listing can tell a half-written object from a real one.
PARTIAL_MARK = ".partial-"


def check_key(key: str) -> str:
    """The key itself, or ValueError: keys are relative, with no empty, "." or ".." segment."""
    if not key or key.startswith("/") or "\\" in key or "\0" in key:
        raise ValueError(f"not a relative object key: {key!r}")
    for segment in key.split("/"):
        if segment in ("", ".", "..") or segment.startswith(PARTIAL_MARK):
            raise ValueError(f"not a relative object key (segment {segment!r}): {key!r}")
    return key


def list_root(prefix: str) -> str:
    """The deepest whole directory that holds every key starting with `prefix` ("" for the top)."""
    return prefix.rsplit("/", 1)[0] if "/" in prefix else ""

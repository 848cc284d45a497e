"""A cheap ``repr`` for HTTP/2 DATA frames, the largest avoidable cost of a large grpclib stream.

(The snapshot no longer goes through h2 at all: see snapshot_stream.py. Watches and every other
call do, and the figures below, measured on a snapshot, apply to any large stream.)

h2 (4.x) formats every received frame for a trace log line *before* calling the logger:
``logger.trace("Received frame: %s", repr(frame))`` in ``H2Connection._receive_frame``. So no
logger or H2Configuration setting avoids the work. hyperframe's DataFrame has no repr of its own:
it falls back to ``Frame._body_repr``, which copies the whole body (``serialize_body``),
hex-encodes all of it and then keeps only the first 20 hex digits. For a snapshot that is ~3
passes over every byte in the one Python thread: ~0.3 s of CPU (hexlify alone 0.26 s) out of
~1.4 s for a 280 MiB snapshot.

etcd's server (grpc-go) sends DATA frames of at most 16 KiB whatever SETTINGS_MAX_FRAME_SIZE we
advertise, so fewer, larger frames are not an option either. Instead DataFrame gets a
``_body_repr`` that produces exactly the same text from the first 11 bytes of the body only.
This changes no behaviour of h2 or hyperframe (only how fast an identical string is built),
and it is not installed if hyperframe ever defines a DataFrame repr of its own.
"""

from __future__ import annotations

import binascii

from hyperframe.frame import DataFrame, Frame

# Frame._body_repr shows at most 20 hex digits (10 bytes) and adds "..." when there were more;
# 11 bytes of the body are enough to tell both apart.
_SHOWN_HEX_DIGITS = 20
_PREFIX_BYTES = _SHOWN_HEX_DIGITS // 2 + 1


def data_frame_body_repr(frame: DataFrame) -> str:
    """What ``Frame._body_repr`` returns for ``frame``, without serialising the whole body."""
    data = frame.data
    if len(data) > _SHOWN_HEX_DIGITS // 2 and "PADDED" not in frame.flags:
        # The usual frame: the body is the data, and longer than what is shown.
        return "<hex:" + data[: _SHOWN_HEX_DIGITS // 2].hex() + "...>"
    prefix = b"".join(
        [frame.serialize_padding_data(), data[:_PREFIX_BYTES], b"\0" * min(frame.pad_length, _PREFIX_BYTES)]
    )[:_PREFIX_BYTES]
    if not prefix:
        return "None"
    digits = binascii.hexlify(prefix).decode("ascii")
    if len(digits) > _SHOWN_HEX_DIGITS:
        digits = digits[:_SHOWN_HEX_DIGITS] + "..."
    return "<hex:" + digits + ">"


def install() -> None:
    """Give hyperframe's DataFrame the cheap body repr (idempotent)."""
    if "_body_repr" in DataFrame.__dict__:
        return  # ours already, or hyperframe's own: either way not the full-body fallback
    if getattr(Frame, "_body_repr", None) is None:
        return  # not the hyperframe this was written against: leave it alone
    setattr(DataFrame, "_body_repr", data_frame_body_repr)  # noqa: B010 (mypy: no method assignment)

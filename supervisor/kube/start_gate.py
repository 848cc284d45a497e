"""Opening the gate a warm member pod's etcd waits behind (the operator's side).

Why: a member pod spends about a second on the node (volumes, sandbox, network, the kubelet's
next look) before its etcd runs, and staged bootstrap starts members one after another, so that
second is paid once per member in a row. The runtime therefore makes the pods of the members to
come ahead of time (warm pods, warm_members.py), while the current one starts. Their etcd
container runs `start-gate` (deploy/start-gate, a small static program the operator image
carries and the pod's first container copies in) in front of etcd: it listens on GATE_PORT
and, once the operator has added the member to etcd and connects with the pod's token, it execs
etcd in place, so the member starts in a container that already runs.

Wire format, on one TCP connection: the token and a newline; the gate answers "ok" and
becomes etcd. Nothing secret crosses: the token only stops a stray connection from opening the
gate early (its worst effect: an etcd that starts before it is a member, fails, and is replaced).
"""

from __future__ import annotations

import logging

import trio

log = logging.getLogger(__name__)

GATE_PORT = 2391
_MAX_LINE = 256


async def _line(stream: trio.abc.ReceiveStream) -> bytes | None:
    data = b""
    try:
        while b"\n" not in data:
            chunk = await stream.receive_some(_MAX_LINE)
            if not chunk or len(data) > _MAX_LINE:
                return None
            data += chunk
    except (trio.BrokenResourceError, OSError):
        return None
    return data.split(b"\n", 1)[0]


async def open_gate(host: str, token: str, *, port: int = GATE_PORT, within: float = 10.0) -> bool:
    """Send the token to the gate at host:port; whether the gate took it within `within` seconds.

    Its container may be running a moment before the gate listens, so a refused connection is
    tried again until then."""
    with trio.move_on_after(within):
        while True:
            try:
                stream = await trio.open_tcp_stream(host, port)
            except OSError:
                await trio.sleep(0.05)
                continue
            async with stream:
                try:
                    await stream.send_all(token.encode() + b"\n")
                except (OSError, trio.BrokenResourceError):
                    return False
                return await _line(stream) == b"ok"
    log.info("the start gate at %s:%d did not open within %.0fs", host, port, within)
    return False

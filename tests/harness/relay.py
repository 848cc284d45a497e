"""A TCP relay on loopback whose connections can be made to go silent, as a pod's do when its
address vanishes with its network namespace: no FIN, no RST, just nothing ever again. New
connections after that reach the target as before (the member's new pod under the same name).
"""

from __future__ import annotations

import attrs
import trio


@attrs.define
class SilentRelay:
    target_port: int
    port: int = 0
    # Connections accepted before this generation forward nothing any more, in either direction.
    _generation: int = 0

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._relay, listeners)

    def silence_existing(self) -> None:
        self._generation += 1

    async def _relay(self, client: trio.SocketStream) -> None:
        born = self._generation
        try:
            server = await trio.open_tcp_stream("127.0.0.1", self.target_port)
            async with client, server, trio.open_nursery() as nursery:
                nursery.start_soon(self._pump, client, server, born)
                nursery.start_soon(self._pump, server, client, born)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # one side hung up: so does the relay, as a network would

    async def _pump(self, source: trio.SocketStream, sink: trio.SocketStream, born: int) -> None:
        while data := await source.receive_some():
            if born == self._generation:  # silenced: swallow, keep the socket open
                await sink.send_all(data)
        await sink.send_eof()

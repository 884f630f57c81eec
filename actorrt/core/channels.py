"""Named channels between processes, for libraries built on top of the runtime.

A library (``actorrt.collective``) registers a handler under a name in each process that needs it
and sends opaque payloads to that name in other processes, over the same ordered peer streams as
tasks. The runtime reads nothing of a payload. A message that arrives before its handler is
registered (a node restarted for a recovery hears from its peers before its actors replay the
task that sets the library up) is kept for it, up to a bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from actorrt.rpc import node_pb2

log = logging.getLogger(__name__)

# Messages kept for a handler that is not registered yet, per channel.
MAX_UNCLAIMED = 10_000

Handler = Callable[[str, bytes], None]  # (peer address, payload)


class Channels:
    def __init__(self, loop: asyncio.AbstractEventLoop, send: Callable[[str, node_pb2.ChannelMessage], None]) -> None:
        self._loop = loop
        self._send = send
        self.address = ""  # this process's, once it serves
        self._handlers: dict[str, Handler] = {}
        self._unclaimed: dict[str, list[tuple[str, bytes]]] = {}

    def register(self, name: str, handler: Handler) -> None:
        """Deliver ``name``'s messages to ``handler(peer, payload)`` on the loop, the kept ones first."""
        self._handlers[name] = handler
        for peer, payload in self._unclaimed.pop(name, []):
            handler(peer, payload)

    @property
    def in_use(self) -> bool:
        """Whether a library has registered a handler here (its messages are opaque to the runtime)."""
        return bool(self._handlers)

    def send(self, address: str, name: str, payload: bytes) -> None:
        """Send ``payload`` to the ``name`` handler at ``address``, in order with everything else
        this process sends there (to this process itself: soon, not now)."""
        message = node_pb2.ChannelMessage(name=name, payload=payload)
        if address == self.address:
            self._loop.call_soon(self.deliver, address, message)
        else:
            self._send(address, message)

    def deliver(self, peer: str, message: node_pb2.ChannelMessage) -> None:
        handler = self._handlers.get(message.name)
        if handler is not None:
            handler(peer, message.payload)
            return
        waiting = self._unclaimed.setdefault(message.name, [])
        if len(waiting) < MAX_UNCLAIMED:
            waiting.append((peer, message.payload))
        else:
            log.warning("dropped a message of channel %r from %s: no handler for it here", message.name, peer)

"""Back-pressure for plain actor calls: at most N calls in flight from a caller to an actor.

An actor created with ``options(max_in_flight=N)`` hands out handles that bound each *channel*, a
(caller, actor) pair: the caller (a driver, or an actor) has at most N calls to that actor whose
results have not come back. A driver's ``.remote()`` blocks for room; an actor awaits it
(``await handle.method.remote_async(...)``), which holds its mailbox, so a slow consumer slows its
producers instead of queueing without end.

The window is runtime state, not actor state, so nothing here is checkpointed or logged. A replay
waits for room as the lost run did: a call that a survivor ran is deferred (sent only if its
result is asked for) and counts as answered at once, so a replay never waits on a call that is
not sent. An actor's calls to itself do not count (its running task would hold the room it waits
for); a cycle of bounded channels can still wait on itself, as blocking calls can.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict

Channel = tuple[bytes, bytes]  # (sender, receiving actor)


class CallWindows:
    """The unanswered calls of every bounded channel of this process.

    ``opened`` is called where a call is built (any thread), ``answered`` where its result, or its
    failure, reaches this process (the event loop), so a call counts from the moment it exists.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._room = threading.Condition()
        self._open: dict[Channel, set[bytes]] = defaultdict(set)  # unanswered task IDs per channel
        self._channel_of: dict[bytes, Channel] = {}
        self._waiters: dict[Channel, list[asyncio.Future[None]]] = defaultdict(list)  # actors, on the loop

    def in_flight(self, channel: Channel) -> int:
        with self._room:
            return len(self._open.get(channel, ()))

    def opened(self, channel: Channel, task_id: bytes) -> None:
        with self._room:
            self._open[channel].add(task_id)
            self._channel_of[task_id] = channel

    def answered(self, task_id: bytes) -> None:
        """The call ``task_id`` has its result (or failed): its channel has room for one more."""
        with self._room:
            channel = self._channel_of.pop(task_id, None)
            if channel is None:
                return
            calls = self._open[channel]
            calls.discard(task_id)
            if not calls:
                del self._open[channel]
            self._room.notify_all()
        for waiter in self._waiters.pop(channel, []):
            if not waiter.done():
                waiter.set_result(None)

    def wait_blocking(self, channel: Channel, limit: int) -> None:
        """A driver thread: return once ``channel`` has fewer than ``limit`` calls in flight."""
        with self._room:
            self._room.wait_for(lambda: len(self._open.get(channel, ())) < limit)

    async def wait(self, channel: Channel, limit: int) -> None:
        """An actor, on the loop: return once ``channel`` has fewer than ``limit`` calls in flight."""
        while self.in_flight(channel) >= limit:
            waiter = self._loop.create_future()
            self._waiters[channel].append(waiter)
            await waiter

"""The drivers a head knows: those connected now, and those that left.

A driver is connected while it has a subscription open to the head. The view names the connected
ones, and the most recent that disconnected: the objects those owned are gone, also for a process
that never saw them connected (a node restarted since). Each connected driver's heartbeats carry
its lineage stash's numbers, kept here for the dashboard.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from actorrt.rpc import node_pb2

# Addresses of disconnected drivers the view names (a bound: an address is rarely asked for long after).
DEPARTED_DRIVERS_KEPT = 1000


class ConnectedDrivers:
    def __init__(self, changed: Callable[[], None]) -> None:
        self.connected: dict[str, int] = {}  # driver address -> its open subscriptions
        self.departed: deque[str] = deque(maxlen=DEPARTED_DRIVERS_KEPT)
        self.lineage: dict[str, node_pb2.LineageStats] = {}  # driver address -> its latest heartbeat's
        self._changed = changed  # the view changed

    def joined(self, address: str) -> None:
        self.connected[address] = self.connected.get(address, 0) + 1
        if address in self.departed:  # reconnected (or a new driver on a reused address)
            self.departed.remove(address)
        self._changed()

    def restore(self, connected: list[str], departed: list[str]) -> None:
        """A restarted head takes the drivers its predecessor's view named. Those connected then
        count as connected (a recovery asks them to flush their stashes) until they come back, or
        are found ``missing``."""
        self.departed.extend(departed)
        self.connected.update(dict.fromkeys(connected, 0))

    async def missing_after(self, seconds: float) -> None:
        """After ``seconds``, the drivers that were connected to the head before this one and have not
        come back are gone."""
        await asyncio.sleep(seconds)
        for address in [a for a, subscriptions in self.connected.items() if not subscriptions]:
            self._departed(address)

    def left(self, address: str) -> None:
        self.connected[address] -= 1
        if not self.connected[address]:
            self._departed(address)

    def _departed(self, address: str) -> None:
        del self.connected[address]
        self.lineage.pop(address, None)
        self.departed.append(address)
        self._changed()

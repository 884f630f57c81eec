"""The lease under which a node process acts as a live member of its cluster.

The head declares a node dead when its heartbeats stop for its timeout. A node that was only
stopped (SIGSTOP, a paused VM, a long swap) and then resumes does not know that yet: it would run
its queued tasks and send their results while its replacement replays them. So a node acts only
under a lease. Each heartbeat the head accepts grants ``seconds`` counted from when the node *sent*
it, and the head grants less than its timeout, which it counts from when it *received* the last
one: a lease always runs out before the head can declare its holder dead. A process whose lease
has run out sends nothing, writes nothing and starts no task until a new grant comes; the head
grants none to an incarnation it declared dead, which exits when its view says so. While the
head's grants do not come (it is down or restarting), the store grants the lease instead
(``actorrt.cluster.store_lease``), under the same rule.

The clock is ``time.monotonic``: it keeps running while the process is stopped.

A lease may also be *suspended* (``ft="checkpoint"``: the process is frozen while the head finds
which nodes go back after a failure): it then holds no more than a run-out one until resumed.
"""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from collections.abc import Callable
from time import monotonic

# Heartbeats whose grant is still awaited, at most (older ones are forgotten: a grant that answers
# one of them would be older than a later one anyway).
_OUTSTANDING = 64


class Lease:
    """Unlimited until ``limit`` is called (drivers are not fenced: no other process takes over
    their role); a node limits it when it registers."""

    def __init__(self) -> None:
        self._until = math.inf
        self._seq = 0
        self._sent: OrderedDict[int, float] = OrderedDict()
        self._granted = asyncio.Event()
        self.revoked = ""  # why this process may never act again
        self.suspended_for = 0  # the rollback round it is frozen for (0: none)
        self.on_revoked: Callable[[str], None] = lambda why: None

    def limit(self, sent_at: float, seconds: float) -> None:
        """The first lease: ``seconds`` from ``sent_at`` (the registration request's departure)."""
        self._until = sent_at + seconds

    def heartbeat(self) -> int:
        """Number a heartbeat about to go out, remembering when it went."""
        self._seq += 1
        self._sent[self._seq] = monotonic()
        while len(self._sent) > _OUTSTANDING:
            self._sent.popitem(last=False)
        return self._seq

    def granted(self, heartbeat: int, seconds: float) -> None:
        """The head accepted ``heartbeat``: the lease runs ``seconds`` from when it was sent."""
        sent_at = self._sent.get(heartbeat)
        if sent_at is None or self.revoked:
            return
        while self._sent and next(iter(self._sent)) <= heartbeat:
            self._sent.popitem(last=False)
        self.extend(sent_at, seconds)

    def extend(self, sent_at: float, seconds: float) -> None:
        """A grant of ``seconds`` from ``sent_at``, when the request for it left (``monotonic()``)."""
        if self.revoked:
            return
        self._until = max(self._until, sent_at + seconds)
        if self.valid():
            self._granted.set()

    def revoke(self, why: str) -> None:
        """The cluster has replaced this incarnation: the lease never comes back."""
        if not self.revoked:
            self.revoked = why
            self._until = -math.inf
            self.on_revoked(why)

    def suspend(self, round_: int) -> None:
        """Act no more until ``resume(round_)`` (or a later round's)."""
        self.suspended_for = max(self.suspended_for, round_)

    def resume(self, decided: int) -> None:
        """Rollback rounds up to ``decided`` are decided: a suspension for one of them ends."""
        if self.suspended_for and decided >= self.suspended_for:
            self.suspended_for = 0
            if self.valid():
                self._granted.set()

    def valid(self) -> bool:
        return not self.suspended_for and monotonic() < self._until

    def remaining(self) -> float:
        """Seconds the lease still runs (negative: run out)."""
        return self._until - monotonic()

    async def held(self) -> None:
        """Return once the lease is valid (at once, nearly always)."""
        while not self.valid():
            self._granted.clear()
            await self._granted.wait()

"""The calls an actor restored under ``ft="checkpoint"`` takes before any other's.

A rollback round may have an actor do again what it did since its checkpoint, when all of it came
from one sender (``actorrt.lineage.rollback_plan``). Restored, it must take that sender's calls up
to where the round counted them before any other's, or it could do something else: what others
send meanwhile waits, and goes back to the head of its mailbox, in order, once those ran.
"""

from __future__ import annotations

import asyncio

from actorrt.core.ledger import SenderLedger
from actorrt.rpc import common_pb2 as pb


class FirstCalls:
    def __init__(self, sender: bytes, upto: int) -> None:
        self.sender, self.upto = sender, upto
        self._waiting: list[pb.TaskSpec] = []

    def waits(self, spec: pb.TaskSpec, ledger: SenderLedger, mailbox: asyncio.Queue) -> bool:
        """Whether ``spec`` waits (set aside if so)."""
        if self.taken(ledger, mailbox) or spec.sender == self.sender:
            return False
        self._waiting.append(spec)
        return True

    def taken(self, ledger: SenderLedger, mailbox: asyncio.Queue) -> bool:
        """Whether the first calls ran; if so, what waited goes back to the head of ``mailbox``
        (its runner, the only caller, takes them next)."""
        if ledger.last_counter.get(self.sender, 0) < self.upto:
            return False
        mailbox._queue.extendleft(reversed(self._waiting))  # asyncio.Queue keeps a deque; no public way
        self._waiting = []
        return True

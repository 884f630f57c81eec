"""A driver's bound on what it keeps for other actors' replays.

A driver keeps the large arguments of the tasks it sends until their receivers checkpoint, for
their replays: without checkpoints, without end. When what it keeps for one actor passes a quarter
of the pinned-bytes budget, it asks that actor to checkpoint, with the task ``actorrt.checkpoint``
sends (logged like any), and the pins its checkpoint covers go. Only what that cannot release is
spilled to disk (``objects/retention.py``). Actors do not ask: a task sent on a reading of memory
would not be sent again by their replay, which must send exactly what they sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from actorrt.core.object_ref import ObjectRef
from actorrt.core.submitter import Submitter
from actorrt.core.task_spec import CHECKPOINT_METHOD
from actorrt.lineage import ids
from actorrt.objects.retention import Retention

log = logging.getLogger(__name__)

CHECK_S = 0.5  # how often it weighs what it keeps, between submissions too


class MemoryPressure:
    def __init__(self, retention: Retention, submitter: Submitter, loop: asyncio.AbstractEventLoop,
                 is_pending: Callable[[bytes], bool]) -> None:
        self._retention = retention
        self._submitter = submitter
        self._loop = loop
        self._is_pending = is_pending  # whether a task this process sent has no result yet
        self._slots: dict[bytes, int] = {}  # the slot each receiver was placed on
        self._weighed_at = 0  # what was kept when it was last weighed
        self._asked: dict[bytes, ObjectRef | None] = {}  # receiver -> its checkpoint's result (None: being sent)

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(CHECK_S)
            self.weigh()

    def sent(self, receiver: bytes, slot: int) -> None:
        """A task went to ``receiver`` (on ``slot``), its arguments pinned: weigh again once what is
        kept grew by a sixteenth of the budget."""
        self._slots[receiver] = slot
        if self._retention.kept_bytes() - self._weighed_at > self._retention.budget_bytes // 16:
            self.weigh()

    def weigh(self) -> None:
        self._weighed_at = self._retention.kept_bytes()
        for receiver, ref in list(self._asked.items()):
            if ref is not None and not self._is_pending(ids.producer_task(ref.object_id)):
                del self._asked[receiver]
        limit = self._retention.budget_bytes // 4
        for receiver, kept in self._retention.pinned_by_receiver().items():
            if kept > limit and receiver not in self._asked and receiver in self._slots:
                self._asked[receiver] = None
                self._retention.pressure_checkpoints += 1
                log.info("asking actor %s to checkpoint: %d bytes kept for its replay", ids.short(receiver), kept)
                # From another thread, as the driver's callers submit: sent behind what they queued.
                asked = self._loop.run_in_executor(None, self._submitter.submit_task, receiver, self._slots[receiver],
                                                   CHECKPOINT_METHOD, (), {})
                asked.add_done_callback(lambda done, receiver=receiver: self._checkpoint_sent(receiver, done))

    def _checkpoint_sent(self, receiver: bytes, done: asyncio.Future) -> None:
        if done.exception() is not None:
            log.warning("could not ask actor %s to checkpoint: %s", ids.short(receiver), done.exception())
            del self._asked[receiver]
            return
        ref = done.result()
        ref._retrieved = True  # its outcome is the checkpoint's announcement, not a value to get
        self._asked[receiver] = ref

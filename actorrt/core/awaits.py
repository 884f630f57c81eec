"""What the tasks running on a node wait for: reported to the head, and failed if they deadlock.

An actor's running task waits when its method awaits a ref, or when its ref arguments are not
there yet; a remote-function call waits the same ways. Each such await that lasts is reported
with the node's heartbeats (``actorrt.cluster.deadlocks`` finds the cycles among them). For a
suspected cycle the node confirms, in its next heartbeats, which awaited tasks of it are yet to
end here. When the head names a cycle, each of its awaits still pending raises ``DeadlockError``.
That outcome is recorded in the actor task's application log, so a replay raises it at the same
await at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from actorrt.core import context
from actorrt.core.task_spec import SenderContext
from actorrt.exceptions import DeadlockError
from actorrt.lineage import ids
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import head_pb2
from actorrt.util import pickling

T = TypeVar("T")

# Awaits that have lasted this long are reported (most end within milliseconds).
REPORT_AFTER_S = 0.5
# What a deadlocked await records in its task's log (with the object and the message).
_MARK = "actorrt: deadlock"
# How long a node answers for the objects of a suspected cycle.
CONFIRM_FOR_S = 2.0


@dataclass
class _Pending:
    waiter: SenderContext
    task_id: bytes  # the waiter's task that waits
    ref: pb.ObjectRefProto
    since: float
    task: asyncio.Task
    deadlock: str = ""  # why it is failed, once the head named its cycle


class Awaits:
    def __init__(self, on_record: Callable[[], Callable[[pb.TaskSpec], None]]) -> None:
        self._on_record = on_record  # the lineage stash's, for the record of a deadlock
        # Called before an actor's task waits (its held outputs may be what it waits for).
        self.before_waiting: Callable[[SenderContext], Awaitable[None]] | None = None
        self._pending: dict[tuple[bytes, bytes, bytes], _Pending] = {}
        self._to_confirm: dict[bytes, tuple[bytes, float]] = {}  # object id -> (its producer, asked when)

    async def watch(self, waiter: SenderContext | None, ref: pb.ObjectRefProto,
                    value: Callable[[], Awaitable[T]]) -> T:
        """``await value()``, the value of ``ref``, for the task ``waiter`` runs now (if any)."""
        if waiter is None or not waiter.current_task or not ref.producer:  # not in a task, or a put
            return await value()
        running = context.running_task.get(None)
        if running is not None and running.spec.task_id != waiter.current_task:
            return await value()  # an asyncio task an earlier method left behind: the actor is not waiting
        recorded = _recorded_deadlock(ref.object_id)
        if recorded is not None:  # a replay: the run before the failure deadlocked here
            raise DeadlockError(recorded)
        if self.before_waiting is not None:
            await self.before_waiting(waiter)
        key = (waiter.sender_id, waiter.current_task, ref.object_id)
        if key in self._pending:  # the same task awaits the same object twice at once
            return await value()
        pending = self._pending[key] = _Pending(waiter, waiter.current_task, ref, asyncio.get_running_loop().time(),
                                                asyncio.current_task())
        try:
            return await value()
        except asyncio.CancelledError:
            if not pending.deadlock or pending.task.uncancel() > 0:  # not (only) the head's doing
                raise
        finally:
            del self._pending[key]
        if not waiter.function:  # a function call is run again, not replayed: it records nothing
            context.record(lambda: (_MARK, ref.object_id, pending.deadlock), self._on_record())
        raise DeadlockError(pending.deadlock)

    def report(self, now: float) -> list[head_pb2.Await]:
        """The awaits pending for ``REPORT_AFTER_S`` or more."""
        return [head_pb2.Await(waiter=p.waiter.sender_id, task_id=p.task_id, object_id=p.ref.object_id,
                               producer=p.ref.producer, waited_s=now - p.since, waiter_name=p.waiter.running)
                for p in self._pending.values() if now - p.since >= REPORT_AFTER_S
                and not getattr(p.waiter, "has_free_slot", bool)()]  # a concurrent actor serves on meanwhile

    def deadlocked(self, deadlock: head_pb2.Deadlock) -> None:
        """The head suspects these awaits wait for each other (confirm the tasks they await that
        are yet to end here), or found it sure (those pending here fail)."""
        if deadlock.suspected:
            now = asyncio.get_running_loop().time()
            for edge in deadlock.cycle:
                self._to_confirm[edge.object_id] = (edge.producer, now)
            return
        for edge in deadlock.cycle:
            pending = self._pending.get((edge.waiter, edge.task_id, edge.object_id))
            if pending is not None and not pending.deadlock:
                pending.deadlock = deadlock.message
                pending.task.cancel()


    def confirmations(self, yet_to_end: Callable[[bytes, bytes], bool], now: float) -> list[bytes]:
        """The objects of suspected cycles whose tasks are yet to end here: ``yet_to_end(producer,
        task id)`` says whether that task is queued or running on this node."""
        for object_id, (_, asked) in list(self._to_confirm.items()):
            if now - asked > CONFIRM_FOR_S:
                del self._to_confirm[object_id]
        return [object_id for object_id, (producer, _) in self._to_confirm.items()
                if yet_to_end(producer, ids.producer_task(object_id))]


def _recorded_deadlock(object_id: bytes) -> str | None:
    """The message of the deadlock the running task's log records next for ``object_id``, if it does."""
    task = context.running_task.get(None)
    entry = task.next_logged() if task is not None else None
    if entry is None or _MARK.encode() not in entry[:64]:
        return None
    mark, recorded_object, message = pickling.loads(entry)
    if recorded_object != object_id:
        return None
    task.take_logged()
    return message

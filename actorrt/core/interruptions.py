"""A kill that interrupts the running ``async def`` method, at a point a replay finds again.

``actorrt.kill`` sends the kill task, then a notice on the same stream. At the notice the actor
skips its queued tasks ahead of the kill (each records that in its log, as a cancelled task does)
and interrupts the method it awaits: the method's coroutine gets ``CancelledError`` at its await,
and its caller gets ``ActorDiedError``.

Where it was interrupted is recorded in the method's log as the number of tasks it had sent. That
is all others could see of its progress: a replay of the method cancels it at its first await
after it sent as many, so its receivers get the same calls again, and no new one. (What it did
between that await and the one the kill reached changed only the actor's state, and the actor is
dead.) A plain method, and a call of an actor with ``max_concurrency``, run to their end.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable

from actorrt.core.serialization import runtime_error
from actorrt.lineage.application_log import RunningTask
from actorrt.rpc import common_pb2 as pb
from actorrt.util import pickling

_MARK = "actorrt: interrupted after sends"
# What a task the kill skipped (queued ahead of it) records first in its log.
KILLED = "actorrt: skipped by a kill"
KILLED_ENTRY = pickling.dumps(KILLED)  # as actorrt.record writes it


class Interrupted(Exception):  # noqa: N818 - not an error of the method: how its await ends
    """The awaited method was interrupted by a kill."""


def _entry(sent: int) -> bytes:
    return pickle.dumps((_MARK, sent), protocol=5)


def recorded_interruption(spec: pb.TaskSpec) -> int | None:
    """How many tasks ``spec`` had sent when a kill interrupted it, if its log says one did."""
    for entry in reversed(spec.application_log):
        if _MARK.encode() in entry[:64]:
            mark = pickle.loads(entry)
            if isinstance(mark, tuple) and len(mark) == 2 and mark[0] == _MARK:
                return mark[1]
    return None


def interrupt(task: RunningTask, runner: asyncio.Task, on_record: Callable[[pb.TaskSpec], None]) -> None:
    """Interrupt ``task``, a live method awaited by ``runner``: recorded, then cancelled."""
    task.record(lambda: (_MARK, task.sent), on_record, encode=lambda mark: _entry(mark[1]))
    task.interrupted = True
    runner.cancel()


def sent_one(task: RunningTask) -> None:
    """``task`` sent a task: a replay of an interrupted one is cancelled once it sent as many."""
    task.sent += 1
    if task.interrupt_after == task.sent and not task.interrupted:
        cancel_at_next_await(task)


def cancel_at_next_await(task: RunningTask) -> None:
    """Cancel the asyncio task running ``task`` (on the loop): its next await raises."""
    task.interrupted = True
    asyncio.current_task().cancel()


def killed_error(who: str, actor_id: bytes, running: bool) -> pb.RemoteError:
    what = "while it ran" if running else "before it ran"
    return runtime_error(pb.ACTOR_DIED, f"actor {who} was killed with actorrt.kill() {what}", actor_id)

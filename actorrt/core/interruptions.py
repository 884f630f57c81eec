"""A kill that interrupts the running ``async def`` method, at a point a replay finds again.

``actorrt.kill`` sends the kill task, then a notice on the same stream. At the notice the actor
skips its queued tasks ahead of the kill (each records that in its log, as a cancelled task does)
and interrupts the method it awaits: the method's coroutine gets ``CancelledError`` at its await,
and its caller gets ``ActorDiedError``.

Where it was interrupted is recorded in the method's log as the number of tasks it had sent. That
is all others could see of its progress: a replay of the method runs it in an asyncio task of its
own, cancels that at its first await after it sent as many, and refuses any further send, so its
receivers get the same calls again, and no new one. (What it did between that await and the one
the kill reached changed only the actor's state, and the actor is dead.) A plain method, a call
of an actor with ``max_concurrency``, and a method that kills its own actor run to their end.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from actorrt.core.serialization import runtime_error
from actorrt.lineage.application_log import INTERRUPTED_MARK, RunningTask, is_interruption
from actorrt.rpc import common_pb2 as pb
from actorrt.util import pickling

# What a task the kill skipped (queued ahead of it) records first in its log.
KILLED = "actorrt: skipped by a kill"
KILLED_ENTRY = pickling.dumps(KILLED)  # as actorrt.record writes it


class Interrupted(Exception):  # noqa: N818 - not an error of the method: how its await ends
    """The awaited method was interrupted by a kill."""


def _entry(sent: int) -> bytes:
    return pickle.dumps((INTERRUPTED_MARK, sent), protocol=5)


def recorded_interruption(spec: pb.TaskSpec) -> int | None:
    """How many tasks ``spec`` had sent when a kill interrupted it, if its log says one did."""
    for entry in reversed(spec.application_log):
        if is_interruption(entry):
            return pickle.loads(entry)[1]
    return None


def interrupt(task: RunningTask, runner: asyncio.Task, on_record: Callable[[pb.TaskSpec], None]) -> None:
    """Interrupt ``task``, a live method that ``runner`` awaits (suspended): recorded, then
    cancelled, which cancels what it waits for."""
    task.record(lambda: (INTERRUPTED_MARK, task.sent), on_record, encode=lambda mark: _entry(mark[1]))
    task.interrupted = True
    runner.cancel()


async def replay_interrupted(task: RunningTask, awaitable: Awaitable[Any], after: int) -> NoReturn:
    """Replay a method a kill interrupted after ``after`` sends: in an asyncio task of its own (a
    cancel of the actor's runner could outlive the method), cancelled at its first await past
    them; raises ``Interrupted`` (or ``CancelledError`` if the actor is being stopped)."""
    inner = asyncio.ensure_future(awaitable)
    task.interrupt_after, task.cancel = after, inner.cancel
    if after == 0:
        task.interrupted = True
        asyncio.get_running_loop().call_soon(inner.cancel)  # once it reached its first await
    try:
        await inner
    except BaseException:  # noqa: BLE001 - it ends as the first run did, whatever it raised
        pass
    if asyncio.current_task().cancelling():
        raise asyncio.CancelledError
    raise Interrupted


def may_send(task: RunningTask | None) -> None:
    """Before ``task`` sends a task: a replay of an interrupted one that sent as many as before
    sends no more (the await the first run was interrupted at may not wait this time)."""
    if task is not None and task.interrupt_after is not None and task.sent >= task.interrupt_after:
        raise asyncio.CancelledError


def sent_one(task: RunningTask) -> None:
    """``task`` sent a task: a replay of an interrupted one is cancelled once it sent as many."""
    task.sent += 1
    if task.interrupt_after == task.sent and not task.interrupted:
        task.interrupted = True
        task.cancel()  # its own asyncio task's: delivered at its next await


def killed_error(who: str, actor_id: bytes, running: bool) -> pb.RemoteError:
    what = "while it ran" if running else "before it ran"
    return runtime_error(pb.ACTOR_DIED, f"actor {who} was killed with actorrt.kill() {what}", actor_id)

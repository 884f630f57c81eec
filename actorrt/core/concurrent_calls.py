"""An actor's calls running at once (``ActorOptions.max_concurrency``).

The actor's runner takes its tasks in mailbox order, as always: each gets its place in the
actor's order (recorded, or the replay's) when it starts. A call of an ``async def`` method then
runs beside the others, up to N at once; its steps take their turns in the actor's recorded
sequence (``interleaving.py``). Any other task (a plain method, a checkpoint, a kill, a timer's
firing) waits until no call runs and runs alone, and so does a checkpoint that falls due: the
state it snapshots lies between whole calls.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actorrt.core import context
from actorrt.core.interleaving import EXTRA, Interleaving, drive, left_over
from actorrt.core.task_spec import CallSender
from actorrt.exceptions import ReplayDivergedError
from actorrt.rpc import common_pb2 as pb

if TYPE_CHECKING:
    from actorrt.core.actor import ActorInstance, Started


@dataclass
class ConcurrentCall:
    """One call among several: its sender view, and the turns its steps take."""

    actor: ActorInstance
    sender: CallSender
    replayed: bool
    steps: Interleaving
    diverged: str = field(default="")

    async def run(self, start: Callable[[], Any]) -> Any:
        """``start()`` (the method's call) and the coroutine it returns, step by step in turn."""
        ft = self.actor.services.ft
        on_record = ft.on_record if ft.logs_lineage else None  # (nothing is replayed: nothing to record)
        try:
            await self._turn(on_record)
            result = start()
            if inspect.iscoroutine(result):
                result = await drive(result, lambda: self._turn(on_record))
            if self.replayed and left_over(context.running_task.get()):
                raise ReplayDivergedError(f"the replay of {self.sender.running}() ended before the steps it "
                                          f"recorded: it read something between two awaits that it did not record")
            return result
        except ReplayDivergedError as exc:
            self.diverged = str(exc)
            raise

    async def _turn(self, on_record: Callable[[pb.TaskSpec], None] | None) -> None:
        await self.steps.turn(on_record)
        self.actor.running = self.sender.current_task  # the call whose step runs now


async def run_concurrently(actor: ActorInstance, limit: int) -> None:
    """The actor's runner, with up to ``limit`` calls of async methods at once."""
    calls: dict[bytes, asyncio.Task] = {}  # by task ID
    while True:
        spec = await actor.mailbox.get()
        under_way = calls.get(spec.task_id)
        if under_way is not None:  # sent again while it runs (after a recovery): answered once it ends
            await asyncio.wait([under_way])
        if not await actor.ready(spec):
            continue
        concurrent = _concurrent(actor, spec)
        while calls and (not concurrent or len(calls) >= limit or actor.checkpointer.due()):
            await asyncio.wait(calls.values(),
                               return_when=asyncio.FIRST_COMPLETED if concurrent else asyncio.ALL_COMPLETED)
        if not calls and actor.checkpointer.due():
            await actor.checkpoint_now()  # between whole calls
        started = await actor.start(spec)
        if not concurrent:
            actor.running = started.spec.task_id
            value = await actor.execute(started)
            actor.running = b""
            await actor.finish(started, value)
            continue
        task = calls[spec.task_id] = asyncio.ensure_future(_call(actor, started))
        task.add_done_callback(lambda _, task_id=spec.task_id: calls.pop(task_id, None))


async def _call(actor: ActorInstance, started: Started) -> None:
    spec = started.spec
    call = ConcurrentCall(actor, CallSender(actor.context, spec.task_id, f"{actor.who}.{spec.method}",
                                            lambda: len(actor.calls_running) < actor.creation.max_concurrency),
                          started.replayed, steps(actor))
    actor.calls_running.add(spec.task_id)
    try:
        value = await actor.execute(started, call)
    finally:
        actor.calls_running.discard(spec.task_id)
    if call.diverged and actor.death is None:
        actor.stop_diverged(call.diverged)
        call.steps.fail(ReplayDivergedError(actor.death.message))  # the calls waiting for a turn end with it
    await actor.finish(started, value, checkpoint=False)  # (the runner takes it between calls)


def steps(actor: ActorInstance) -> Interleaving:
    """The actor's sequence of steps (in its extras: a checkpoint keeps it)."""
    found = actor.context.extras.get(EXTRA)
    if found is None:
        found = actor.context.extras[EXTRA] = Interleaving()
    return found


def _concurrent(actor: ActorInstance, spec: pb.TaskSpec) -> bool:
    """Whether ``spec`` is a call of one of the actor's ``async def`` methods (others run alone)."""
    if spec.method.startswith("_") or actor.instance is None or actor.death is not None:
        return False
    return inspect.iscoroutinefunction(getattr(type(actor.instance), spec.method, None))

"""An actor's calls running at once (``ActorOptions.max_concurrency``).

The actor's runner takes its tasks in mailbox order, as always: each gets its place in the
actor's order (recorded, or the replay's) when it starts. A call of an ``async def`` method then
runs beside the others, up to N at once; its steps take their turns in the actor's recorded
sequence (``interleaving.py``). Any other task (a plain method, a checkpoint, a kill, a timer's
firing) waits until no call runs and runs alone, and so does a checkpoint that falls due: the
state it snapshots lies between whole calls.

Calls end in any order, but what follows a task's end in the lineage (the commit marks of its
channel, which assume a sender's tasks end in counter order) is told in the order they started.
A re-send of a call under way is answered from the ledger once the call ends, while the runner
reads on. The replay is over once every replayed call has ended, not when the last one starts.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actorrt.core import context
from actorrt.core.interleaving import EXTRA, Interleaving, drive, left_over, take_turn
from actorrt.core.task_spec import CallSender
from actorrt.exceptions import ReplayDivergedError
from actorrt.rpc import common_pb2 as pb

if TYPE_CHECKING:
    from actorrt.core.actor import ActorInstance, Started

# A replay lets the node's other actors run after this many of its tasks that run alone.
YIELD_EVERY = 64


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
        task = context.running_task.get()
        try:
            if await take_turn(lambda: self._turn(on_record)) is not None:
                raise asyncio.CancelledError  # stopped before its first step
            result = start()
            if inspect.iscoroutine(result):
                result = await drive(result, lambda: self._turn(on_record))
            return result
        except ReplayDivergedError as exc:
            self.diverged = self.diverged or str(exc)
            raise
        finally:
            if self.replayed and not self.diverged and left_over(task):
                self.diverged = (f"the replay of {self.sender.running}() ended before the steps it recorded: it "
                                 f"read something between two awaits that it did not record")

    async def _turn(self, on_record: Callable[[pb.TaskSpec], None] | None) -> None:
        await self.steps.turn(on_record)
        self.actor.running = self.sender.current_task  # the call whose step runs now


class _Runner:
    def __init__(self, actor: ActorInstance, limit: int) -> None:
        self.actor = actor
        self.limit = limit
        self.calls: dict[bytes, asyncio.Task] = {}  # under way, by task ID
        self.ended: deque[list] = deque()  # started calls in order: [spec, replayed, ended?]
        self.replaying: set[bytes] = set()  # replayed calls under way

    async def run(self) -> None:
        actor = self.actor
        alone = 0
        try:
            while True:
                spec = await actor.mailbox.get()
                under_way = self.calls.get(spec.task_id)
                if under_way is not None:  # sent again while it runs (after a recovery): answered once it ends
                    under_way.add_done_callback(lambda _, spec=spec: actor.answer_resent(spec))
                    continue
                if not await actor.ready(spec):
                    continue
                concurrent = _concurrent(actor, spec)
                while self.calls and (not concurrent or len(self.calls) >= self.limit or actor.checkpointer.due()):
                    await asyncio.wait(self.calls.values(), return_when=asyncio.FIRST_COMPLETED if concurrent
                                       else asyncio.ALL_COMPLETED)
                if not self.calls and actor.checkpointer.due():
                    await actor.checkpoint_now()  # between whole calls
                started = await actor.start(spec)
                if not concurrent:
                    actor.running = started.spec.task_id
                    value = await actor.execute(started)
                    actor.running = b""
                    await actor.finish(started, value)
                    alone += 1
                    if actor.replaying and alone % YIELD_EVERY == 0:
                        await asyncio.sleep(0)  # a long replay must not starve the node's other actors
                    continue
                if started.replayed:
                    self.replaying.add(spec.task_id)
                place = [started.spec, started.replayed, False]
                self.ended.append(place)
                task = self.calls[spec.task_id] = asyncio.ensure_future(self._call(started, place))
                task.add_done_callback(lambda _, task_id=spec.task_id: self.calls.pop(task_id, None))
        finally:
            for task in self.calls.values():  # the actor is stopped
                task.cancel()

    async def _call(self, started: Started, place: list) -> None:
        actor, spec = self.actor, started.spec
        steps = actor_steps(actor)
        call = ConcurrentCall(actor, CallSender(actor.context, spec.task_id, f"{actor.who}.{spec.method}",
                                                lambda: len(actor.calls_running) < self.limit),
                              started.replayed, steps)
        actor.calls_running.add(spec.task_id)
        try:
            value = await actor.execute(started, call)
        finally:
            actor.calls_running.discard(spec.task_id)
        if call.diverged and actor.death is None:
            actor.stop_diverged(call.diverged)
        if actor.death is not None:  # the calls waiting for a turn end with it, now and later
            steps.fail(ReplayDivergedError(actor.death.message))
        place[2] = True
        self._tell_ended()
        await actor.finish(started, value, checkpoint=False, executed=False, replay_done=False)
        self.replaying.discard(spec.task_id)
        if started.replayed and not actor.replay and not self.replaying and not actor.replayed.is_set():
            actor.replayed.set()  # every replayed call has ended, not only started
            actor.timers.resume()

    def _tell_ended(self) -> None:
        """Tell the lineage the calls that ended, in the order they started."""
        ft = self.actor.services.ft
        while self.ended and self.ended[0][2]:
            spec, replayed, _ = self.ended.popleft()
            ft.on_executed(spec, replayed)


async def run_concurrently(actor: ActorInstance, limit: int) -> None:
    """The actor's runner, with up to ``limit`` calls of async methods at once."""
    await _Runner(actor, limit).run()


def actor_steps(actor: ActorInstance) -> Interleaving:
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

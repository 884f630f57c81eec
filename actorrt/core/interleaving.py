"""A concurrent actor's calls, interleaved at their awaits in an order a replay repeats.

With ``max_concurrency=N``, up to N calls of an actor's ``async def`` methods run at once. Each
call is a sequence of steps: from its start, or from an await whose result came, to its next
await or its end. A step runs alone (the event loop runs one thing at a time), and its place in
the actor's sequence of steps is what the interleaving decides: which call's step comes next.

So each step takes a number in the actor's sequence, recorded in its call's application log
(``actorrt.record``'s log, with the call's other nondeterministic events) before it runs. A replay
runs a call's step only when the actor's sequence reaches the number the call recorded for it:
the calls go through the same steps, in the same order, and leave the same state. Steps past the
recorded ones (the run before the failure did them, but nobody saw their effect) run live, after
every recorded one.

A call whose replay ends with recorded steps left, or reaches a step where its log records
something else, did not do what it did before: it read something between two awaits that it did
not record (a clock, a global). The replay stops with ``ReplayDivergedError``.

``drive`` runs a call's coroutine as its task would (futures, bare yields, cancellation), taking a
turn before each step. The sequence is kept in the actor's extras, so a checkpoint (taken while no
call runs) keeps where it is.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from actorrt.core import context
from actorrt.exceptions import ReplayDivergedError
from actorrt.rpc import common_pb2 as pb
from actorrt.util import pickling

# The actor's extras entry holding its ``Interleaving``.
EXTRA = "actorrt:interleaving"
_MARK = "actorrt: step"


def _mark(n: int) -> tuple[str, int]:
    return (_MARK, n)


def _plain(mark: tuple[str, int]) -> bytes:
    return pickle.dumps(mark, protocol=5)  # plain data: no cloudpickle needed, a tenth of its cost


def _step_of(entry: bytes) -> int | None:
    """The step number log entry ``entry`` records, or None if it records something else."""
    if _MARK.encode() not in entry[:64]:
        return None
    value = pickling.loads(entry)
    return value[1] if isinstance(value, tuple) and len(value) == 2 and value[0] == _MARK else None


def recorded_steps(spec: pb.TaskSpec) -> list[int]:
    """The step numbers ``spec``'s log records."""
    return [n for n in map(_step_of, spec.application_log) if n is not None]


class Interleaving:
    def __init__(self) -> None:
        self.next = 0  # the number the actor's next step takes
        self._last_task = b""  # the task that took the step before it
        self._recorded_last = -1  # the last number the queued replay recorded: live steps come after
        self._turns: dict[int, asyncio.Future] = {}  # a recorded number -> the call waiting for it
        self._live: list[asyncio.Future] = []  # calls past their logs, waiting for the replay's steps
        self._failed: BaseException | None = None  # the actor stopped: every turn raises it

    def __getstate__(self) -> dict[str, int]:  # (the step sequence goes on in a restored actor)
        return {"next": self.next}  # taken while no call runs: nobody waits

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__init__()
        self.next = state["next"]

    def replaying(self, order: Iterable[pb.TaskSpec]) -> None:
        """A replay of ``order`` is queued: live steps wait until its recorded ones have run.

        Only the steps numbered without a gap from ``next`` count as recorded. Each step's record
        depends on the task that took the step before it, so whoever saw a step's effect holds
        every step before it: a step past a gap was seen by nobody, and runs again live."""
        recorded = {n for spec in order for n in recorded_steps(spec)}
        last = self.next - 1
        while last + 1 in recorded:
            last += 1
        self._recorded_last = last

    async def turn(self, on_record: Callable[[pb.TaskSpec], None] | None) -> None:
        """Return when the running call may take its next step, its number recorded (live,
        through ``on_record``; None where nothing is logged) or reached (replayed)."""
        if self._failed is not None:
            raise self._failed
        if on_record is None:
            self.next += 1
            return
        task = context.running_task.get()
        recorded = _next_recorded(task, self._recorded_last)
        if recorded is None:
            while self.next <= self._recorded_last:
                waiting = asyncio.get_running_loop().create_future()
                self._live.append(waiting)
                await waiting
            task.record(lambda: _mark(self.next), on_record, depends_on=self._last_task, encode=_plain)
        elif recorded != self.next:
            if recorded < self.next:
                raise ReplayDivergedError(f"the replay of call {task.spec.method}() reached its step {recorded} "
                                          f"after step {self.next - 1} of the actor")
            waiting = self._turns[recorded] = asyncio.get_running_loop().create_future()
            await waiting
        self.next += 1
        self._last_task = task.spec.task_id
        self._wake()

    def fail(self, error: BaseException) -> None:
        """The actor stopped (a replay diverged): calls waiting for their turn raise ``error``,
        and so does every later turn."""
        self._failed = error
        waiting, self._turns, live, self._live = list(self._turns.values()), {}, self._live, []
        for future in [*waiting, *live]:
            if not future.done():
                future.set_exception(error)

    def _wake(self) -> None:
        waiting = self._turns.pop(self.next, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(None)
        if self.next > self._recorded_last and self._live:
            live, self._live = self._live, []
            for waiting in live:
                if not waiting.done():
                    waiting.set_result(None)


def _next_recorded(task: Any, recorded_last: int) -> int | None:
    """The step number the running task's log records next (consumed), or None past its log;
    a step past ``recorded_last`` (past a gap) ends the log there: it runs live from now on."""
    if task.position >= len(task.spec.application_log):
        return None
    step = _step_of(task.spec.application_log[task.position])
    if step is None:
        raise ReplayDivergedError(f"the replay of call {task.spec.method}() took a step where its log records "
                                  f"another event: it read something between two awaits that it did not record")
    if step > recorded_last:
        del task.spec.application_log[task.position:]  # seen by nobody: what follows is live
        return None
    task.position += 1
    return step


def left_over(task: Any) -> int:
    """Step marks the running task's log still holds as it ends (a replay that ended early)."""
    return sum(_step_of(entry) is not None for entry in task.spec.application_log[task.position:])


async def drive(coro: Coroutine[Any, Any, Any], turn: Callable[[], Coroutine[Any, Any, None]]) -> Any:
    """Run ``coro`` as the task running it would (what it awaits, bare yields, cancellation),
    taking ``turn()`` before each step after its first (the caller took the first one's)."""
    thrown: BaseException | None = None
    while True:
        try:
            yielded = coro.send(None) if thrown is None else coro.throw(thrown)
        except StopIteration as done:
            return done.value
        thrown = None
        try:
            if yielded is None:  # a bare yield (asyncio.sleep(0)): the others' turn
                await asyncio.sleep(0)
            elif asyncio.isfuture(yielded):
                yielded._asyncio_future_blocking = False  # as a task does with the future it waits on
                await asyncio.wait([yielded])  # (not consumed, nor cancelled with this task)
            else:
                thrown = RuntimeError(f"a coroutine yielded {yielded!r}, not a future")
        except asyncio.CancelledError as cancelled:  # this task was cancelled (a timeout in the call)
            if yielded is None or not yielded.cancel():
                thrown = cancelled  # else the future it awaits is cancelled: its await raises there
        cancelled_meanwhile = await take_turn(turn)
        if cancelled_meanwhile is not None and thrown is None:
            thrown = cancelled_meanwhile


async def take_turn(turn: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.CancelledError | None:
    """``turn()``, taken even if this task is cancelled while it waits (the actor's sequence
    must not lose the step); the cancellation, if one came, to throw into the call at its step."""
    waiting = asyncio.ensure_future(turn())
    cancelled = None
    while True:
        try:
            await asyncio.shield(waiting)
            return cancelled
        except asyncio.CancelledError as exc:
            cancelled = exc
